#!lua
-- forget.lua clears an id's record of a refusal, so that the id can be sent
-- again (an operator replaying its dead letter once the cause is fixed). A
-- record of a send, a live claim or no record is left as it is: a message
-- sent is never sent twice.
--
-- KEYS[1] -> id record key ({sms:<account>}:id:<id>)
-- ARGV[1] -> '1' to clear a refusal's record, '0' only to read it (a dry
--            run)
--
-- Returns {what the record said ('' when none; a live claim is 'held'),
-- 1 when it was cleared, else 0}. The count of sends ('<n>#') is kept.

local v = redis.call('GET', KEYS[1])
if not v then
  return {'', 0}
end
local count, state = string.match(v, '^(%d+)#(.*)$')
if not count then
  state = v
end
if string.sub(state, 1, 6) == 'claim:' then
  return {'held', 0}
end
if ARGV[1] == '1' and (state == 'rejected' or string.sub(state, 1, 8) == 'refused:') then
  if count then
    redis.call('SET', KEYS[1], count .. '#', 'KEEPTTL')
  else
    redis.call('DEL', KEYS[1])
  end
  return {state, 1}
end
return {state, 0}
