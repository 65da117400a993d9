-- list: a page of the deferred ids by due time, read only.
-- KEYS[1] due, KEYS[2] messages.
-- ARGV[1] offset, ARGV[2] count. Returns {total, id, due, envelope, ...}.
local ids = redis.call('ZRANGE', KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[1]) + tonumber(ARGV[2]) - 1, 'WITHSCORES')
local out = {redis.call('ZCARD', KEYS[1])}
for i = 1, #ids, 2 do
  out[#out + 1] = ids[i]
  out[#out + 1] = ids[i + 1]
  out[#out + 1] = redis.call('HGET', KEYS[2], ids[i]) or ''
end
return out
