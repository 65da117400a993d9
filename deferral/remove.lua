-- remove: forget a released (or dropped) id.
-- KEYS[1] due, KEYS[2] messages, KEYS[3] claims.
-- ARGV[1] id, ARGV[2] token ("" for an operator's drop: no claim needed).
-- With a token, only while the id is still claimed by it: a deferral of
-- the id since (its release came back outside its window) stays.
if ARGV[2] ~= '' and redis.call('HGET', KEYS[3], ARGV[1]) ~= ARGV[2] then
  return 0
end
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
return 1
