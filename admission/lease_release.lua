-- lease_release.lua ends in-flight leases: the one of a send that is over,
-- and any whose admission reply or release was lost (orphans).
--
-- KEYS[1] -> in-flight leases ({sms:<account>}:leases)
-- ARGV    -> the lease members, at least one
--
-- Returns how many of them were live (expired or unknown ones count 0).
return redis.call('ZREM', KEYS[1], unpack(ARGV))
