-- route.lua: a skipped route admits the first class to the caller's
-- destination prefix as probes only, one per interval across every
-- process; other classes go as they would. In the script unless the
-- route rule is off (Config.Route).
--
-- KEYS[11] -> the skip of the account's route to the caller's destination
--            prefix ({sms:<account>}:skip:<prefix>, '<next_probe_us>'),
--            set by receipt.lua when the first class's messages to that
--            prefix stop arriving; read for the first class only, and
--            only by a caller that can send elsewhere. A call with no
--            prefix, or that cannot fail over, names
--            {sms:<account>}:skip:, never set. While it lives the route
--            admits probes only: one first-class send per ARGV[23] across
--            every process
-- ARGV[23] -> the probe interval of a skipped route, in microseconds
--
-- Returns ROUTE_SKIPPED, the wait until the route's next probe, when it
-- is not due. Writes, once a probe is allowed, when the next one is due.

-- @check
local route_due = num(s[11])
if route_due and route_due > now then
  return stop(route_due - now, R.ROUTE_SKIPPED)
end

-- @after
if route_due then
  -- This send is the route's probe: the next one is due an interval after.
  redis.call('SET', KEYS[11], string.format('%d', math.min(at + tonumber(ARGV[23]), max_us)), 'KEEPTTL')
end
