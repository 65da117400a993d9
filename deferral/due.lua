-- due: an operator's early release: make a deferred id due at ARGV[2]
-- (ms) and mark it forced, so that its release is sent whatever its
-- window says (never past its cap: defer.lua); nothing when it is not
-- deferred.
-- KEYS[1] due, KEYS[2] forced. ARGV[1] id. Returns 1 when it was deferred.
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  return 0
end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
redis.call('SADD', KEYS[2], ARGV[1])
return 1
