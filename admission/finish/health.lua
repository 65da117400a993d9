-- health.lua: the send's outcome counted in the account's health, which
-- the admission script reads: a run of failures degrades it, probes that
-- succeed make it healthy again. It ends the script with its reply.
--
-- It replies {n, health}: n is record.lua's written.
--
-- KEYS[4] -> the account's health ({sms:<account>}:health; the admission script
--            reads it)
-- ARGV[5] -> what the send said of the account's health: 'ok' (the
--            provider answered: accepted or refused the message),
--            'probe_ok' (the same, for a send admitted as a degraded
--            account's probe: only those count toward its recovery),
--            'fail' (a transient failure: 5xx, no connection), 'timeout'
--            (no answer in time), or '' (nothing: a 429, an account
--            refusal, no send). A failure may be followed by ' <age_us>':
--            how long before this call its send began (none: just now).
--            A failure whose send began before the account last changed
--            state (degraded, or healthy again), or, while degraded,
--            before the first success of its run of probes, is not
--            counted: it says nothing of the provider since
-- ARGV[6] -> the health rule: '<window_us> <fails> <timeouts> <probes>
--            <probe_us> <keep_ms>'. A healthy account becomes degraded on
--            <fails> failures in a row within <window_us> of the run's
--            first (an older run starts again), or on <timeouts> timeouts
--            in a row; any success ends the run.
--            A degraded one is healthy again after <probes> successes in
--            a row (the admission script admits one probe per <probe_us>); a failure
--            starts the count again. The state lives <keep_ms> past its
--            last change. An account healthy again keeps 'h 0 0 0 0 0
--            <since_us>' for <window_us> after its recovery, for the rule
--            of ARGV[5]

-- @read
local result, age = string.match(ARGV[5] or '', '^(%S*) ?(%d*)$')
result, age = result or '', math.min(tonumber(age) or 0, 2 ^ 53 - 1)
local window, max_fails, max_timeouts, probes, probe_us, keep = string.match(ARGV[6] or '', '^(%d+) (%d+) (%d+) (%d+) (%d+) (%d+)$')
if result ~= '' and not window then
  return redis.error_reply('finish.lua: a health result without a rule')
end
if window then
  window, max_fails, max_timeouts = tonumber(window), tonumber(max_fails), tonumber(max_timeouts)
  -- SET PX refuses a lifetime <= 0 and one past the clock's range.
  probes, probe_us, keep = tonumber(probes), tonumber(probe_us), math.min(math.max(tonumber(keep), 1), 2 ^ 40)
end

-- @reply
-- The account's health. Every success is reported, whatever the
-- admission said: a run of failures another process began since then ends
-- at it. On a healthy account with no run counted it costs one GET.
if result == '' then
  return {n, 0}
end
local v = redis.call('GET', KEYS[4])
if not v and (result == 'ok' or result == 'probe_ok') then
  return {n, 0}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local mode, fails, timeouts, start, ok, nxt, since = 'h', 0, 0, 0, 0, 0, 0
if v then
  local m, a, b, c, d, e, f = string.match(v, '^([hd]) (%d+) (%d+) (%d+) (%d+) (%d+) (%d+)$')
  if m then
    -- Counts and instants read back within [0, 2^53), as written.
    local function num(x)
      return math.min(tonumber(x), 2 ^ 53 - 1)
    end
    mode, fails, timeouts, start = m, num(a), num(b), num(c)
    ok, nxt, since = num(d), num(e), num(f)
  end
end
local began = now - age
-- healthy makes the account healthy, nothing counted; it keeps when it
-- recovered (since) while a send begun before then may still end.
local function healthy(since)
  local left = math.ceil((since + window - now) / 1000)
  if left < 1 then
    redis.call('DEL', KEYS[4])
  else
    redis.call('SET', KEYS[4], string.format('h 0 0 0 0 0 %d', since), 'PX', left)
  end
  return {n, 0}
end
if result == 'ok' or result == 'probe_ok' then
  if mode == 'd' and result == 'ok' then
    return {n, 2} -- not a probe: admitted before the account degraded
  end
  if mode == 'h' then
    if fails == 0 then
      return {n, 0} -- nothing counted
    end
    return healthy(since)
  end
  if ok + 1 >= probes then
    return healthy(now)
  end
  if ok == 0 then
    start = now -- the run of probes' first success
  end
  ok = ok + 1
elseif began < since or (mode == 'd' and ok > 0 and began < start) then
  return {n, mode == 'd' and 2 or (fails > 0 and 1 or 0)} -- a send older than what Redis knows since
elseif mode == 'd' then
  ok = 0
else
  if fails == 0 or now - start > window then
    fails, start = 0, now -- a run of failures older than the window starts again
  end
  fails = fails + 1
  if result == 'timeout' then
    timeouts = timeouts + 1
  else
    timeouts = 0
  end
  if fails >= max_fails or timeouts >= max_timeouts then
    mode, ok, nxt, since = 'd', 0, now + probe_us, now
  end
end
redis.call('SET', KEYS[4], string.format('%s %d %d %d %d %d %d', mode, fails, timeouts, start, ok, nxt, since), 'PX', keep)
if mode == 'd' then
  return {n, 2}
end
return {n, 1}
