-- lease.lua: the send's in-flight lease ended, with any whose admission
-- reply or release was lost.
--
-- KEYS[2] -> in-flight leases ({sms:<account>}:leases)
-- ARGV[15..] -> lease members to end (none, the send's, and any whose
--            admission reply or release was lost)

-- @write
if #ARGV > 14 then
  redis.call('ZREM', KEYS[2], unpack(ARGV, 15))
end
