-- attempt.lua counts the provider attempts of one message id, for the
-- http.request.resend_count of traces where Pub/Sub does not count them.
--
-- KEYS[1] -> attempts key ({sms:<account>}:attempts:<id>)
-- ARGV[1] -> lifetime of the count in milliseconds (below 1 counts as 1)
--
-- Returns the count after this attempt (1 for the first).
local n = redis.call('INCR', KEYS[1])
-- PEXPIRE <= 0 would delete the count it has just made.
redis.call('PEXPIRE', KEYS[1], math.max(tonumber(ARGV[1]), 1))
return n
