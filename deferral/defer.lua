-- defer: store one message until due.
-- KEYS[1] due (zset id -> ms), KEYS[2] messages (hash id -> envelope),
-- KEYS[3] claims (hash id -> token).
-- ARGV[1] id, ARGV[2] due (ms), ARGV[3] envelope.
-- A new deferral of an id replaces its envelope and cancels a releaser's
-- claim on it: that releaser's remove then leaves it stored.
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
return 1
