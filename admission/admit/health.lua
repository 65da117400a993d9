-- health.lua: a degraded account admits probes only, one send per probe
-- interval across every process. Always in the script.
--
-- KEYS[10] -> the account's health ({sms:<account>}:health), written by
--            finish.lua from what the sends came to (docs/design.md, "An
--            account's health"): absent while healthy with no failure
--            counted, else '<mode> <fails> <timeouts> <run_start_us>
--            <probes_ok> <next_probe_us> <since_us>', mode 'h' (healthy,
--            a run of failures counted, or none: healthy again since
--            <since_us>) or 'd' (degraded; <run_start_us> is then the
--            first probe success of the run). While degraded
--            the account admits probes only: one send per ARGV[21]
--            across every process
-- ARGV[21] -> the probe interval of a degraded account, in microseconds
-- ARGV[22] -> '1' when the caller can send elsewhere (failover): a
--            degraded account denies it at once, and leaves each probe to
--            callers that cannot until it has been due for a probe
--            interval (so that a home whose every caller fails over is
--            still probed, at half the rate)
-- ARGV[26] -> the probe interval of a degraded account for a caller that
--            hedges its send (one that another account takes over if
--            this one does not answer soon), in microseconds; 0 for
--            other callers. Such a caller takes a probe once this long
--            has passed since the last probe (the next probe of the
--            others is due ARGV[21] after it), so that a hedged first
--            class finds a provider answering again within this, at the
--            cost of the hedge's wait for each probe that finds it not
--
-- Sets health (the reply's): 0 healthy, 1 healthy with a run of failures
-- counted (a success ends it: the caller reports it to finish.lua), 2
-- degraded (an allowed send is a probe). Returns DEGRADED, the wait until
-- the next probe, when it is not due. Writes, once a probe is allowed,
-- when the next one is due: an interval after it.

-- @read
local probe_due = 0
local hv = s[10] and {string.match(s[10], '^([hd]) (%d+) (%d+) (%d+) (%d+) (%d+) (%d+)$')}
if hv and hv[1] then
  if hv[1] == 'd' then
    health, probe_due = 2, num(hv[6]) or 0
  elseif hv[2] ~= '0' then
    health = 1 -- else healthy again, kept for finish.lua's rule of old sends
  end
end

-- @check
if health == 2 then
  local due = probe_due
  local hedged = tonumber(ARGV[26]) or 0
  if hedged > 0 then
    due = due - tonumber(ARGV[21]) + hedged
  elseif ARGV[22] == '1' then
    due = due + tonumber(ARGV[21])
  end
  if now < due then
    return stop(due - now, R.DEGRADED)
  end
end

-- @after
if health == 2 then
  -- This send is the probe: the next one is due an interval after it.
  redis.call('SET', KEYS[10], string.format('d %s %s %s %s %d %s', hv[2], hv[3], hv[4], hv[5],
    math.min(at + tonumber(ARGV[21]), max_us), hv[7]), 'KEEPTTL')
end
