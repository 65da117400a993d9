-- lease_release.lua ends one send's in-flight lease.
--
-- KEYS[1] -> in-flight leases ({sms:<account>}:leases)
-- ARGV[1] -> the lease member
--
-- Returns 1 when the lease was live, 0 when it had expired or was unknown.
return redis.call('ZREM', KEYS[1], ARGV[1])
