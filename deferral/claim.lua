-- claim: take up to ARGV[2] ids due at ARGV[1] (ms) for release.
-- KEYS[1] due, KEYS[2] messages, KEYS[3] claims.
-- ARGV[1] now (ms), ARGV[2] batch, ARGV[3] the claim's end (ms),
-- ARGV[4] the claimer's token.
-- A claimed id stays stored, due again at the claim's end: a releaser
-- that dies before its remove leaves it to the next one. Returns
-- {id, envelope, ...}; an id without an envelope is dropped from due.
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
local out = {}
for _, id in ipairs(ids) do
  local env = redis.call('HGET', KEYS[2], id)
  if env then
    redis.call('ZADD', KEYS[1], ARGV[3], id)
    redis.call('HSET', KEYS[3], id, ARGV[4])
    out[#out + 1] = id
    out[#out + 1] = env
  else
    redis.call('ZREM', KEYS[1], id)
  end
end
return out
