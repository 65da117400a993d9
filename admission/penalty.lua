-- penalty.lua records the provider's Retry-After so that every process stops.
--
-- KEYS[1] -> penalty key ({sms:<account>}:penalty)
-- ARGV[1] -> penalty length in milliseconds (> 0)
--
-- Returns the penalty's remaining milliseconds after the call. A shorter
-- penalty never shortens a longer live one.

local want = tonumber(ARGV[1])
local cur = redis.call('PTTL', KEYS[1])
if cur < want then
  redis.call('SET', KEYS[1], '1', 'PX', want)
  return want
end
return cur
