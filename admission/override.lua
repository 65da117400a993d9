-- override.lua sets or clears an operator's rate override for the account:
-- gcra.lua reads it on every call and applies each value only where it is
-- lower than the configured rate.
--
-- KEYS[1] -> override hash ({sms:<account>}:override)
-- ARGV[1] -> target_rps (0: none)
-- ARGV[2] -> marketing_rps (0: none)
-- ARGV[3] -> lifetime in milliseconds (0: until cleared)
--
-- Returns 1 when an override was set, 0 when it was cleared.
if tonumber(ARGV[1]) <= 0 and tonumber(ARGV[2]) <= 0 then
  redis.call('DEL', KEYS[1])
  return 0
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'target_rps', ARGV[1], 'marketing_rps', ARGV[2])
if tonumber(ARGV[3]) > 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
end
return 1
