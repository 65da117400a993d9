-- leases.lua: the most sends in flight on the account, checked once the
-- rate allows. In the script of an account with MaxInFlight only.
--
-- KEYS[6] -> in-flight leases ({sms:<account>}:leases), a sorted set of
--            lease members scored by expiry; a process that dies mid-send
--            leaves its lease to expire. The key lives past its longest
--            lease, never less
-- ARGV[11] -> the most sends in flight on the account (0: no limit)
-- ARGV[12] -> the lease member of this send (unique per attempt)
-- ARGV[13] -> lease lifetime in microseconds (longer than a send can take)
--
-- Stale leases of dead processes are reclaimed on the way in. Returns
-- IN_FLIGHT, the wait until the first lease expires (at most one global
-- interval), when the set is full: no TAT is written. Else adds the
-- send's lease.

-- @lease
local max_inflight = tonumber(ARGV[11])
if max_inflight > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[6], '-inf', now)
  if redis.call('ZCARD', KEYS[6]) >= max_inflight then
    local first = redis.call('ZRANGE', KEYS[6], 0, 0, 'WITHSCORES')
    return deny(math.max(math.min((num(first[2]) or max_us) - now, g_int), 1), R.IN_FLIGHT)
  end
  local ttl = tonumber(ARGV[13])
  redis.call('ZADD', KEYS[6], at + ttl, ARGV[12])
  -- The key's life is never shortened: an earlier lease may outlive this
  -- one (another process's LeaseTTL, a slot booked further ahead). A key
  -- just made by the ZADD has none (PTTL -1). PEXPIRE GT alone would take
  -- that for an infinite one and leave the key forever.
  local px = math.ceil((at + ttl - now) / 1000) + 1000
  if redis.call('PTTL', KEYS[6]) < px then
    redis.call('PEXPIRE', KEYS[6], px)
  end
end
