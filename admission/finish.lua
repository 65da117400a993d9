#!lua flags=allow-oom
-- finish.lua is the one call after a send: it writes the id's record of
-- what became of it and ends the send's in-flight lease.
--
-- KEYS[1] -> id record key ({sms:<account>}:id:<id>)
-- KEYS[2] -> in-flight leases ({sms:<account>}:leases)
-- KEYS[3] -> the sends counter of the send's class and second
--            ({sms:<account>}:sent:<class>:<unix second>), counted when
--            ARGV[4] is above 0 (any key of the account otherwise)
-- ARGV[1] -> the record: 'sent', 'sent:<provider id>' or 'refused:<reason>'
--            (refused, its dead letter not out yet), which overwrites any
--            claim (the outcome is a fact); 'rejected' (refused and
--            dead-lettered), written only over a record that still says
--            'refused:...': a replay of the dead letter may already have
--            cleared it (forget.lua), claimed the id and sent it, and its
--            record stands; or '' to give back the caller's claim, so that
--            a retry need not wait for it to expire
-- ARGV[2] -> record lifetime in milliseconds (below 1 counts as 1): of the
--            record, or of the count a given-back claim keeps
-- ARGV[3] -> the caller's claim token ('' when it holds none)
-- ARGV[4] -> units the provider accepted, to count (0: none): what
--            `dispatcher status` reads; the counter lives 70 s
-- ARGV[5..] -> lease members to end (none, the send's, and any whose
--            admission reply or release was lost)
--
-- Returns 1 when the record was written or the claim given back, 0 when
-- the claim was not the caller's any more (expired and taken by another
-- attempt, or final) or a 'rejected' found no refusal, and the record was
-- left alone.
local n = 1
if ARGV[1] == 'rejected' then
  local v = redis.call('GET', KEYS[1])
  local count, state = string.match(v or '', '^(%d+)#(.*)$')
  if not count then
    state = v or ''
  end
  if string.sub(state, 1, 8) == 'refused:' then
    redis.call('SET', KEYS[1], (count and count .. '#' or '') .. 'rejected', 'PX', math.max(tonumber(ARGV[2]), 1))
  else
    n = 0
  end
elseif ARGV[1] ~= '' then
  -- SET PX refuses a lifetime <= 0.
  redis.call('SET', KEYS[1], ARGV[1], 'PX', math.max(tonumber(ARGV[2]), 1))
elseif ARGV[3] ~= '' then
  local v = redis.call('GET', KEYS[1])
  local count, state = string.match(v or '', '^(%d+)#(.*)$')
  if not count then
    state = v
  end
  if state ~= 'claim:' .. ARGV[3] then
    n = 0
  elseif count then
    -- The count of sends outlives the claim.
    redis.call('SET', KEYS[1], count .. '#', 'PX', math.max(tonumber(ARGV[2]), 1))
  else
    redis.call('DEL', KEYS[1])
  end
end
local units = tonumber(ARGV[4]) or 0
if units > 0 and redis.call('INCRBY', KEYS[3], units) == units then
  redis.call('PEXPIRE', KEYS[3], 70000)
end
if #ARGV > 4 then
  redis.call('ZREM', KEYS[2], unpack(ARGV, 5))
end
return n
