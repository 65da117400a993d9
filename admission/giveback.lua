#!lua
-- giveback.lua gives back a resend payload whose publish failed after
-- receipt.lua handed it out: into the message's story, where the next
-- sweep takes it again with the status event still owed. Handed out and
-- given back in turn, one payload is never out twice.
--
-- KEYS[1] -> the message's story ({sms:<account>}:msg:<id>)
-- KEYS[2] -> the owed set ({sms:<account>}:owed)
-- ARGV[1] -> the message's id
-- ARGV[2] -> the resend payload
--
-- Returns 1 when the payload was given back; 0 when it is moot: the story
-- expired, the message was delivered after all, or its event is no
-- longer owed (no sweep would find it).

local got = redis.call('HMGET', KEYS[1], 'status', 'ov')
local status, v = got[1], tonumber(got[2])
-- The owed set's member of the story's version, as receipt.lua writes it:
-- the id alone for the first version.
local member = ARGV[1]
if v and v > 1 and v < math.huge then
  member = ARGV[1] .. '\t' .. string.format('%d', math.min(v, 2 ^ 53 - 1))
end
if not status or status == 'delivered' or not redis.call('ZSCORE', KEYS[2], member) then
  return 0
end
redis.call('HSET', KEYS[1], 'resend', ARGV[2])
return 1
