#!lua
-- resume.lua ends a penalty early, so that every process may send again
-- without waiting for it to run out: an account-level pause once its cause
-- is fixed (a credential file replaced), or a 429 penalty an operator ends
-- (`dispatcher override --clear-penalty`). Each ends only its own kind.
--
-- KEYS[1] -> penalty key ({sms:<account>}:penalty)
-- KEYS[2] -> global TAT key ({sms:<account>}:tat:global)
-- KEYS[3] -> probe key ({sms:<account>}:probe), see penalty.lua
-- ARGV[1] -> debt kept in microseconds: the global tolerance tau plus the
--            longest send (MaxCost intervals)
-- ARGV[2] -> what to end: 'account' (an account-level pause) or
--            'throttled' (a 429 penalty)
--
-- Returns 1 when a penalty of that kind was ended, 0 when there was none
-- (or one of the other kind).
--
-- penalty.lua moved the global TAT to the penalty's end: it is brought back
-- to now plus the debt kept, which covers whatever the sends just before
-- the penalty still owed (at most tau plus one send), so the account resumes
-- one message per interval, with no burst, and no window holds sends from
-- both sides of the penalty beyond the bound. The probe key lives one more
-- second from now, not from the penalty's end: the first send after goes
-- alone, and the ones after it book ahead again.

local why = redis.call('GET', KEYS[1])
if not why or string.sub(why, 1, #ARGV[2]) ~= ARGV[2] then
  return 0
end
redis.call('DEL', KEYS[1])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local tat = now + tonumber(ARGV[1])
--@num
if (num(redis.call('GET', KEYS[2])) or 0) > tat then
  redis.call('SET', KEYS[2], string.format('%d', tat), 'PX', math.ceil(tonumber(ARGV[1]) / 1000) + 1000)
end
if redis.call('PTTL', KEYS[3]) > 1000 then
  redis.call('SET', KEYS[3], '1', 'PX', 1000)
end
return 1
