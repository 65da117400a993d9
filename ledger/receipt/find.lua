-- find.lua: a message's story, found by a provider id or by its id, and
-- written back whole. Shared: story.lua (`dispatcher message`'s read)
-- finds it the same way. It reads pre, the account's '{sms:<account>}:',
-- set before it.
--
-- A message's story is the string at its first part's provider id's key,
-- {sms:<account>}:pid:<p1>, a JSON object of string fields (cjson), read
-- and written whole: one command each way, its lifetime kept (KEEPTTL).
-- A later part's key holds '<part>\t<p1>'; the id's key
-- {sms:<account>}:msg:<id> holds '1\t<p1>' when the id's record here does
-- not name the story (find, below). An older version kept the story at
-- the id's key, as this string or as a hash of the same fields, and each
-- part's key as '<part>:<id>': such a story is read where it is, as one,
-- and written back there as the string. finish.lua writes id, class,
-- sender, n (its parts), p<i> (part i's provider id) and sent (when its
-- send began: the admitted slot, ms on Redis's clock); this script
-- writes s<i> and c<i> (part i's status and error code), status, code and
-- at (the message's state, its error code, and when it became so, ms), ov
-- (the owed event's version, one more each time an event is owed), resend
-- (a resend payload given back after its publish failed: giveback.lua)
-- and resent ('1' once handed out).

-- @define
-- read is the story v, the GET of key: its fields, or nil when there is
-- none (or it is not an object of strings).
local function read(key, v)
  if type(v) == 'table' and v.err then
    local f = redis.call('HGETALL', key) -- an older version's hash
    local h = {}
    for i = 1, #f, 2 do
      h[f[i]] = f[i + 1]
    end
    return h
  end
  local ok, h = pcall(cjson.decode, type(v) == 'string' and v or '')
  if not ok or type(h) ~= 'table' then
    return nil
  end
  for k, x in pairs(h) do
    if type(k) ~= 'string' or type(x) ~= 'string' then
      return nil
    end
  end
  return h
end

-- find reads the story key leads to, key a provider id's or an id's (id,
-- or nil when unknown): the story, its key, the part key names and the
-- message's id; nil when it leads to none. One GET when key holds the
-- story, two when it points to it.
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
    key = pre .. 'pid:' .. to -- a later part's key, or the id's
    v = redis.pcall('GET', key)
  end
  local h = read(key, v)
  id = h and h.id or id -- an older version's story keeps no id
  if not h or not id then
    return nil
  end
  return h, key, tonumber(part) or 1, id
end

-- byID finds id's story on the account (record: the id's record, when
-- the caller read it already): at the key of the provider id its
-- record names, else through the id's key (a send whose record is not
-- here, or is another id's), where an older version kept the story itself.
local function byID(id, record)
  record = record or redis.call('GET', pre .. 'id:' .. id)
  local pid = string.match(record or '', '^%d*#?sent:(.+)$')
  if pid then
    local h, key, _, found = find(pre .. 'pid:' .. pid)
    if h and found == id then
      return h, key
    end
  end
  local h, key, _, found = find(pre .. 'msg:' .. id, id)
  if h and found == id then
    return h, key
  end
  return nil
end

-- save writes story h at msg whole, keeping its lifetime.
local function save(msg, h)
  redis.call('SET', msg, cjson.encode(h), 'KEEPTTL')
end
