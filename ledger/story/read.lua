-- read.lua: the story of the provider id the record names, else through
-- the id's key, as receipt.lua's byID finds it (find.lua), its fields
-- flattened, and whether its event is owed. Its KEYS and ARGV are
-- head.lua's.

-- @check
local pre = string.sub(KEYS[3], 1, -5) -- '{sms:<account>}:'

-- @read
local record = redis.call('GET', KEYS[1]) or ''
local h = byID(ARGV[1], record)
local fields = {}
for k, x in pairs(h or {}) do
  fields[#fields + 1], fields[#fields + 2] = k, x
end
-- The owed set's member of the story's version, as receipt.lua writes it:
-- the id alone for the first version.
local member = ARGV[1]
local ov = tonumber(h and h.ov)
if ov and ov > 1 and ov < math.huge then
  member = ARGV[1] .. '\t' .. string.format('%d', math.min(ov, 2 ^ 53 - 1))
end
local owed = redis.call('ZSCORE', KEYS[3], member)
return {
  record,
  fields,
  owed and 1 or 0,
  redis.call('EXISTS', KEYS[4]),
}
