-- defer: store one message until due, and begin its trace.
-- KEYS[1] due (zset id -> ms), KEYS[2] messages (hash id -> envelope),
-- KEYS[3] claims (hash id -> token), KEYS[4] forced (set of ids an
-- operator released early), KEYS[5] the id's trace (hash).
-- ARGV[1] id, ARGV[2] due (ms), ARGV[3] envelope, ARGV[4] now (ms),
-- ARGV[5] reason, ARGV[6] how long the trace outlives the due time (ms).
-- An id an operator released early is not stored again for its window:
-- 0, send it (once: the mark is taken). For its cap it is (the mark
-- taken too): an early release never breaks a cap. Else 1: a new
-- deferral of an id replaces its envelope and cancels a releaser's claim
-- on it, so that releaser's remove leaves it stored; its trace says
-- deferred, not yet ended.
if redis.call('SREM', KEYS[4], ARGV[1]) == 1 and ARGV[5] == 'window' then
  return 0
end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
redis.call('HSET', KEYS[5], 'deferred_at', ARGV[4], 'until', ARGV[2], 'reason', ARGV[5])
redis.call('HDEL', KEYS[5], 'ended', 'ended_at')
redis.call('PEXPIRE', KEYS[5], math.max(tonumber(ARGV[2]) - tonumber(ARGV[4]), 0) + tonumber(ARGV[6]))
return 1
