-- trace: one id's deferral trace, read only.
-- KEYS[1] the id's trace. Returns {deferred_at, until, reason, ended,
-- ended_at}, each false when absent (all of them: no trace).
return redis.call('HMGET', KEYS[1], 'deferred_at', 'until', 'reason', 'ended', 'ended_at')
