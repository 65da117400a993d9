#!lua
-- claim.lua takes the send claim of one message id, so that one id is sent
-- at most once across processes and redeliveries. The dispatcher takes it
-- with its slot (the admission script); this one is for a caller that wants the claim
-- alone.
--
-- KEYS[1] -> id record key ({sms:<account>}:id:<id>)
-- ARGV[1] -> claim token, unique per delivery attempt
-- ARGV[2] -> claim lifetime in milliseconds (below 1 counts as 1)
--
-- Returns the record as it stands after the call:
--   'claimed'  -> the caller holds the claim (new, or already its own)
--   'held'     -> another attempt holds a live claim
--   any other  -> the id's record ('sent', 'sent:<provider id>', 'rejected', or 'refused:<reason>'
--                 while a refusal's dead letter is pending): do not send
-- A record '<attempts>#<state>' (the admission script's, counting sends) is read as
-- its state, and keeps its count.
local v = redis.call('GET', KEYS[1])
local n, state = string.match(v or '', '^(%d+)#(.*)$')
if not n then
  state = v
end
if not state or state == '' then
  local c = 'claim:' .. ARGV[1]
  if n then
    c = n .. '#' .. c
  end
  redis.call('SET', KEYS[1], c, 'PX', math.max(tonumber(ARGV[2]), 1))
  return 'claimed'
end
if state == 'claim:' .. ARGV[1] then
  return 'claimed'
end
if string.sub(state, 1, 6) == 'claim:' then
  return 'held'
end
return state
