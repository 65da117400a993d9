#!lua flags=no-writes
-- story.lua reads an id's whole story on the account, for `dispatcher
-- message`, in one call that writes nothing (run with EVALSHA_RO).
--
-- KEYS[1] -> id record key ({sms:<account>}:id:<id>)
-- KEYS[2] -> the message's story ({sms:<account>}:msg:<id>; receipt.lua's
--            header gives its form and fields)
-- KEYS[3] -> the owed set ({sms:<account>}:owed)
-- KEYS[4] -> the message's resend payload ({sms:<account>}:resend:<id>)
-- ARGV[1] -> the message's id
--
-- Returns {record, {field, value, ...}, owed, resend}: record '' when
-- none; the story's fields (bounded: finish.lua keeps at most 64 parts);
-- owed 1 when its status event is owed; resend 1 while its payload waits
-- for a failure.

-- The story's fields, as receipt.lua's load reads them (a JSON object of
-- strings, or an older version's hash), flattened.
local fields = {}
local v = redis.pcall('GET', KEYS[2])
if type(v) == 'table' and v.err then
  fields = redis.call('HGETALL', KEYS[2])
else
  local ok, h = pcall(cjson.decode, v or '')
  if ok and type(h) == 'table' then
    for k, x in pairs(h) do
      if type(k) == 'string' and type(x) == 'string' then
        fields[#fields + 1], fields[#fields + 2] = k, x
      end
    end
  end
end
-- The owed set's member of the story's version, as receipt.lua writes it:
-- the id alone for the first version.
local member = ARGV[1]
for i = 1, #fields, 2 do
  local ov = tonumber(fields[i + 1])
  if fields[i] == 'ov' and ov and ov > 1 and ov < math.huge then
    member = ARGV[1] .. '\t' .. string.format('%d', math.min(ov, 2 ^ 53 - 1))
  end
end
local owed = redis.call('ZSCORE', KEYS[3], member)
return {
  redis.call('GET', KEYS[1]) or '',
  fields,
  owed and 1 or 0,
  redis.call('EXISTS', KEYS[4]),
}
