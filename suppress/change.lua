-- One change of the suppression list, and its entry in the log every
-- process follows, in one call.
-- KEYS[1] the list (a hash: number -> entry)
-- KEYS[2] the log (a stream)
-- KEYS[3] the change counter
-- ARGV[1] "add" or "remove"
-- ARGV[2] the number (E.164)
-- ARGV[3] the change's entry: "<unix ms>|<source>|<account>|<reason>"
-- ARGV[4] the log's cap (entries, approximate)
-- Returns {1, seq} for a change (seq: its number in the log); {0, 0,
-- entry} for an add of a number already on the list, which keeps its
-- first entry (the record of when it was first suppressed) and returns
-- it, for the mirror to publish again; {0, 0} for a remove of a number
-- not on it.
local changed
if ARGV[1] == 'add' then
  changed = redis.call('HSETNX', KEYS[1], ARGV[2], ARGV[3])
else
  changed = redis.call('HDEL', KEYS[1], ARGV[2])
end
if changed == 0 then
  if ARGV[1] == 'add' then
    return {0, 0, redis.call('HGET', KEYS[1], ARGV[2])}
  end
  return {0, 0}
end
local seq = redis.call('INCR', KEYS[3])
redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[4], '*', 'q', seq, 'a', ARGV[1], 'n', ARGV[2], 'e', ARGV[3])
return {1, seq}
