#!lua flags=no-writes
-- story.lua reads an id's whole story on the account, for `dispatcher
-- message`, in one call that writes nothing (run with EVALSHA_RO).
--
-- KEYS[1] -> id record key ({sms:<account>}:id:<id>): the story is at the
--            key of the provider id its 'sent:<provider id>' names
--            ({sms:<account>}:pid:<provider id>, the story or the way to
--            it; receipt.lua's header gives both forms)
-- KEYS[2] -> the id's key ({sms:<account>}:msg:<id>): the way to the
--            story when the record does not name it, or an older
--            version's story itself
-- KEYS[3] -> the owed set ({sms:<account>}:owed)
-- KEYS[4] -> the message's resend payload ({sms:<account>}:resend:<id>)
-- ARGV[1] -> the message's id
--
-- Returns {record, {field, value, ...}, owed, resend}: record '' when
-- none; the story's fields (bounded: finish.lua keeps at most 64 parts);
-- owed 1 when its status event is owed; resend 1 while its payload waits
-- for a failure.

local pre = string.sub(KEYS[3], 1, -5) -- '{sms:<account>}:'

-- The story key leads to, as receipt.lua's find reads it: its fields
-- flattened and the message's id, or nil.
local function find(key, id)
  local v = redis.pcall('GET', key)
  local part, to = string.match(type(v) == 'string' and v or '', '^(%d+)\t(.+)$')
  if not part then
    part, to = string.match(type(v) == 'string' and v or '', '^(%d+):(.+)$')
    if part then -- an older version's part key: the story at the id's key
      id, key = to, pre .. 'msg:' .. to
      v = redis.pcall('GET', key)
    end
  else
    key = pre .. 'pid:' .. to
    v = redis.pcall('GET', key)
  end
  local fields = {}
  if type(v) == 'table' and v.err then
    fields = redis.call('HGETALL', key) -- an older version's hash
  else
    local ok, h = pcall(cjson.decode, type(v) == 'string' and v or '')
    if not ok or type(h) ~= 'table' then
      return nil
    end
    for k, x in pairs(h) do
      if type(k) == 'string' and type(x) == 'string' then
        fields[#fields + 1], fields[#fields + 2] = k, x
        if k == 'id' then
          id = x
        end
      end
    end
  end
  return fields, id
end

-- The story of the provider id the record names, else through the id's
-- key, as receipt.lua's byID finds it.
local record = redis.call('GET', KEYS[1]) or ''
local fields, id
local pid = string.match(record, '^%d*#?sent:(.+)$')
if pid then
  fields, id = find(pre .. 'pid:' .. pid)
end
if id ~= ARGV[1] then
  fields, id = find(KEYS[2], ARGV[1])
end
if id ~= ARGV[1] then
  fields = {}
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
  record,
  fields,
  owed and 1 or 0,
  redis.call('EXISTS', KEYS[4]),
}
