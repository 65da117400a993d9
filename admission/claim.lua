-- claim.lua takes the send claim of one message id, so that one id is sent
-- at most once across processes and redeliveries.
--
-- KEYS[1] -> id record key ({sms:<account>}:id:<id>)
-- ARGV[1] -> claim token, unique per delivery attempt
-- ARGV[2] -> claim lifetime in milliseconds (send timeout plus a margin;
--            below 1 counts as 1)
--
-- Returns the record as it stands after the call:
--   'claimed'  -> the caller holds the claim (new, or already its own)
--   'held'     -> another attempt holds a live claim
--   any other  -> the id's record ('sent', 'sent:<provider id>', 'rejected', or 'refused:<reason>'
--                 while a refusal's dead letter is pending): do not send
local v = redis.call('GET', KEYS[1])
if not v then
  redis.call('SET', KEYS[1], 'claim:' .. ARGV[1], 'PX', math.max(tonumber(ARGV[2]), 1))
  return 'claimed'
end
if v == 'claim:' .. ARGV[1] then
  return 'claimed'
end
if string.sub(v, 1, 6) == 'claim:' then
  return 'held'
end
return v
