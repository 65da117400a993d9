-- get: one deferred id's due time and envelope, read only.
-- KEYS[1] due, KEYS[2] messages. ARGV[1] id. Returns {} or {due, envelope}.
local due = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not due then
  return {}
end
return {due, redis.call('HGET', KEYS[2], ARGV[1]) or ''}
