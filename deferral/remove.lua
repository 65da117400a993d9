-- remove: forget released (or dropped) ids, a page at a time.
-- KEYS[1] due, KEYS[2] messages, KEYS[3] claims.
-- ARGV[1] token ("" for an operator's drop: no claim needed), ARGV[2..]
-- the ids: at most Store's removePage, so that unpack (which stops near
-- 8,000 values) always takes them.
-- With a token, an id is removed only while still claimed by it: a
-- deferral of the id since (its release came back outside its window)
-- stays. Without, only an id still held and claimed by no releaser: a
-- message released, or being released, is not dropped (nor said to be).
-- Returns a 1 (removed) or 0 per id, in their order.
local owners, gone, out = {}, {}, {}
if #ARGV > 1 then
  owners = redis.call('HMGET', KEYS[3], unpack(ARGV, 2))
end
for i = 2, #ARGV do
  local ok
  if ARGV[1] == '' then
    ok = not owners[i - 1] and redis.call('HEXISTS', KEYS[2], ARGV[i]) == 1
  else
    ok = owners[i - 1] == ARGV[1]
  end
  if ok then
    gone[#gone + 1] = ARGV[i]
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
if #gone > 0 then
  redis.call('ZREM', KEYS[1], unpack(gone))
  redis.call('HDEL', KEYS[2], unpack(gone))
  redis.call('HDEL', KEYS[3], unpack(gone))
end
return out
