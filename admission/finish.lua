-- finish.lua writes a message id's final record: the outcome is a fact, so
-- it overwrites any claim.
--
-- KEYS[1] -> id record key ({sms:<account>}:id:<id>)
-- ARGV[1] -> final record: 'sent' or 'rejected'
-- ARGV[2] -> record lifetime in milliseconds (below 1 counts as 1)
--
-- Returns 'OK'.
-- SET PX refuses a lifetime <= 0.
return redis.call('SET', KEYS[1], ARGV[1], 'PX', math.max(tonumber(ARGV[2]), 1))
