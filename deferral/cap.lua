-- cap: take a place for one send of a class to one number, in a sliding
-- window: at most ARGV[3] places in any ARGV[2] ms.
-- KEYS[1] the number's sends (zset id -> ms).
-- ARGV[1] now (ms), ARGV[2] per (ms), ARGV[3] count, ARGV[4] id.
-- Returns {1, 1} for a new place, {1, 0} when the id has one already (a
-- redelivery: counted once), {0, when} when full: when (ms) the oldest
-- place leaves the window.
local now, per, count = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - per)
if redis.call('ZSCORE', KEYS[1], ARGV[4]) then
  return {1, 0}
end
if redis.call('ZCARD', KEYS[1]) >= count then
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return {0, tonumber(oldest[2]) + per}
end
redis.call('ZADD', KEYS[1], now, ARGV[4])
redis.call('PEXPIRE', KEYS[1], per)
return {1, 1}
