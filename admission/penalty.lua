-- penalty.lua records the provider's Retry-After so that every process stops.
--
-- KEYS[1] -> penalty key ({sms:<account>}:penalty)
-- KEYS[2] -> global TAT key ({sms:<account>}:tat:global)
-- ARGV[1] -> penalty length in milliseconds (> 0)
-- ARGV[2] -> global tolerance tau in microseconds
--
-- Returns the penalty's remaining milliseconds after the call. A shorter
-- penalty never shortens a longer live one.
--
-- The global TAT is also moved to the penalty's end plus tau: when the
-- penalty ends the account resumes one message per interval, with no burst,
-- so that a provider still refusing sees one probe per Retry-After, not one
-- per waiting process.

local want = tonumber(ARGV[1])
local cur = redis.call('PTTL', KEYS[1])
if cur < want then
  redis.call('SET', KEYS[1], '1', 'PX', want)
  cur = want
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local tat = now + cur * 1000 + tonumber(ARGV[2])
if tonumber(redis.call('GET', KEYS[2]) or 0) < tat then
  redis.call('SET', KEYS[2], string.format('%d', tat), 'PX', math.ceil((tat - now) / 1000) + 1000)
end
return cur
