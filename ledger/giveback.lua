#!lua
-- giveback.lua gives back a resend payload whose publish failed after
-- receipt.lua handed it out: into the message's story, where the next
-- sweep takes it again with the status event still owed. Handed out and
-- given back in turn, one payload is never out twice.
--
-- KEYS[1] -> the message's story (the key receipt.lua's reply gives:
--            {sms:<account>}:pid:<first provider id>, or an older
--            version's {sms:<account>}:msg:<id>; receipt.lua's JSON object
--            of string fields, or an older version's hash)
-- KEYS[2] -> the owed set ({sms:<account>}:owed)
-- ARGV[1] -> the message's id
-- ARGV[2] -> the resend payload
--
-- Returns 1 when the payload was given back; 0 when it is moot: the story
-- expired, the message was delivered after all, or its event is no
-- longer owed (no sweep would find it).

-- The story's fields, as receipt.lua's load reads them.
local h
local v = redis.pcall('GET', KEYS[1])
if type(v) == 'table' and v.err then
  local f = redis.call('HGETALL', KEYS[1])
  h = {}
  for i = 1, #f, 2 do
    h[f[i]] = f[i + 1]
  end
else
  local ok, d = pcall(cjson.decode, v or '')
  if ok and type(d) == 'table' then
    h = d
  end
end
if not h or type(h.status) ~= 'string' or h.status == 'delivered' then
  return 0
end
-- The owed set's member of the story's version, as receipt.lua writes it:
-- the id alone for the first version.
local member, ov = ARGV[1], tonumber(h.ov)
if ov and ov > 1 and ov < math.huge then
  member = ARGV[1] .. '\t' .. string.format('%d', math.min(ov, 2 ^ 53 - 1))
end
if not redis.call('ZSCORE', KEYS[2], member) then
  return 0
end
h.resend = ARGV[2]
redis.call('SET', KEYS[1], cjson.encode(h), 'KEEPTTL')
return 1
