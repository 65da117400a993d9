-- release.lua gives a send claim back when the message will be retried, so
-- that the next delivery need not wait for the claim to expire.
--
-- KEYS[1] -> id record key ({sms:<account>}:id:<id>)
-- ARGV[1] -> claim token of the caller
--
-- Returns 1 when the caller's claim was removed, 0 when the record is not
-- the caller's claim (expired and taken by another attempt, or final).
if redis.call('GET', KEYS[1]) == 'claim:' .. ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
