#!lua
-- resume.lua ends an account-level pause once its cause is fixed (a
-- credential file replaced), so that every process may send again without
-- waiting for the pause to run out. A 429 penalty is never ended early.
--
-- KEYS[1] -> penalty key ({sms:<account>}:penalty)
-- KEYS[2] -> global TAT key ({sms:<account>}:tat:global)
-- ARGV[1] -> debt kept in microseconds: the global tolerance tau plus the
--            longest send (MaxCost intervals)
--
-- Returns 1 when a pause was ended, 0 when there was none (or a 429's).
--
-- penalty.lua moved the global TAT to the pause's end: it is brought back
-- to now plus the debt kept, which covers whatever the sends just before
-- the pause still owed (at most tau plus one send), so the account resumes
-- one message per interval, with no burst, and no window holds sends from
-- both sides of the pause beyond the bound.

local why = redis.call('GET', KEYS[1])
if not why or string.sub(why, 1, 7) ~= 'account' then
  return 0
end
redis.call('DEL', KEYS[1])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local tat = now + tonumber(ARGV[1])
if tonumber(redis.call('GET', KEYS[2]) or 0) > tat then
  redis.call('SET', KEYS[2], string.format('%d', tat), 'PX', math.ceil(tonumber(ARGV[1]) / 1000) + 1000)
end
return 1
