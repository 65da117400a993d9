#!lua flags=allow-oom
-- finish.lua is the one call after a send: it writes the id's record of
-- what became of it and ends the send's in-flight lease.
--
-- KEYS[1] -> id record key ({sms:<account>}:id:<id>)
-- KEYS[2] -> in-flight leases ({sms:<account>}:leases)
-- KEYS[3] -> the sends counter of the send's class and second
--            ({sms:<account>}:sent:<class>:<unix second>), counted when
--            ARGV[4] is above 0 (any key of the account otherwise)
-- KEYS[4] -> the account's health ({sms:<account>}:health; the admission script
--            reads it)
-- ARGV[1] -> the record: 'sent', 'sent:<provider id>' or 'refused:<reason>'
--            (refused, its dead letter not out yet), which overwrites any
--            claim (the outcome is a fact); 'rejected' (refused and
--            dead-lettered), written only over a record that still says
--            'refused:...': a replay of the dead letter may already have
--            cleared it (forget.lua), claimed the id and sent it, and its
--            record stands; or '' to give back the caller's claim, so that
--            a retry need not wait for it to expire
-- ARGV[2] -> record lifetime in milliseconds (clamped to [1, 2^40]): of the
--            record, or of the count a given-back claim keeps
-- ARGV[3] -> the caller's claim token ('' when it holds none)
-- ARGV[4] -> units the provider accepted, to count (0: none): what
--            `dispatcher status` reads; the counter lives 70 s
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
-- KEYS[5] -> the id's key ({sms:<account>}:msg:<id>), set to
--            '1\t<first provider id>' when ARGV[14] is '1': the way to the
--            story of a send whose record here does not name it (any key
--            of the account otherwise)
-- KEYS[6] -> the message's resend payload ({sms:<account>}:resend:<id>),
--            written when ARGV[10] is not '' (any key of the account
--            otherwise)
-- KEYS[7..] -> the provider's ids of the message's parts, in order
--            ({sms:<account>}:pid:<provider id>): the first part's is set
--            to the story (a JSON object: receipt.lua's header gives its
--            fields), each later one to '<part>\t<first provider id>';
--            none: no story
-- The story's arguments, read only with KEYS[7..]:
-- ARGV[7] -> the message's id
-- ARGV[8] -> its class's name
-- ARGV[9] -> the sender it went from ('' the adapter's)
-- ARGV[10] -> the resend payload ('' none)
-- ARGV[11] -> the resend payload's lifetime in milliseconds (below 1: not
--            kept); the story and the parts' keys live as the record
--            (ARGV[2])
-- ARGV[12] -> the destination's prefix and number hash ('+62 1a2b3c') of
--            a first-class message, which receipt.lua counts its finals
--            by ('' none), kept as the story's prefix
-- ARGV[13] -> when the send's slot opened, ms on Redis's clock (the admission script's
--            slot_us): the story's 'sent'; below 1, this call's TIME
-- ARGV[14] -> '1' to set KEYS[5]: the record this call writes (KEYS[1]) is
--            not the id's or names none of the parts (an overflow
--            account's send, a resend's record, a provider id apart)
-- ARGV[15..] -> lease members to end (none, the send's, and any whose
--            admission reply or release was lost)
--
-- Returns {written, health}: written is 1 when the record was written or
-- the claim given back, 0 when the claim was not the caller's any more
-- (expired and taken by another attempt, or final) or a 'rejected' found
-- no refusal, and the record was left alone; health is the account's
-- after this send, as the admission script reports it (0 healthy, 1 a run of failures
-- counted, 2 degraded; 0 when ARGV[5] is '').
-- The health rule and the story's lifetimes are read before anything is
-- written: a script that errors keeps the writes it made.
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
-- The record's lifetime (its story's too) and the resend's: SET PX and
-- PEXPIRE refuse a lifetime <= 0 and one past the clock's range.
local life = math.min(math.max(tonumber(ARGV[2]) or 1, 1), 2 ^ 40)
local story = #KEYS > 6
local resend_life
if story then
  resend_life = math.min(tonumber(ARGV[11]) or 0, 2 ^ 40)
  if (ARGV[7] or '') == '' then
    return redis.error_reply('finish.lua: a story without the message id')
  end
end
local n = 1
if ARGV[1] == 'rejected' then
  local v = redis.call('GET', KEYS[1])
  local count, state = string.match(v or '', '^(%d+)#(.*)$')
  if not count then
    state = v or ''
  end
  if string.sub(state, 1, 8) == 'refused:' then
    redis.call('SET', KEYS[1], (count and count .. '#' or '') .. 'rejected', 'PX', life)
  else
    n = 0
  end
elseif ARGV[1] ~= '' then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', life)
elseif ARGV[3] ~= '' then
  local v = redis.call('GET', KEYS[1])
  local count, state = string.match(v or '', '^(%d+)#(.*)$')
  if not count then
    state = v
  end
  if state ~= 'claim:' .. ARGV[3] then
    n = 0
  elseif count then
    -- The count of sends outlives the claim.
    redis.call('SET', KEYS[1], count .. '#', 'PX', life)
  else
    redis.call('DEL', KEYS[1])
  end
end
local units = tonumber(ARGV[4]) or 0
if units > 0 and redis.call('INCRBY', KEYS[3], units) == units then
  redis.call('PEXPIRE', KEYS[3], 70000)
end
if #ARGV > 14 then
  redis.call('ZREM', KEYS[2], unpack(ARGV, 15))
end
if story then
  -- The newest send's story replaces an older one's: its parts start
  -- with no status.
  -- Dated by the admission's clock, Redis's: a TIME saved a send.
  local sent = math.min(tonumber(ARGV[13]) or 0, 2 ^ 53 - 1)
  if not (sent >= 1) then
    local t = redis.call('TIME')
    sent = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  local h = {id = ARGV[7], class = ARGV[8], sender = ARGV[9], n = string.format('%d', #KEYS - 6), sent = string.format('%d', sent)}
  if (ARGV[12] or '') ~= '' then
    h.prefix = ARGV[12]
  end
  local pre = string.sub(KEYS[2], 1, -7) -- '{sms:<account>}:' of '{sms:<account>}:leases'
  for i = 7, #KEYS do
    h['p' .. (i - 6)] = string.sub(KEYS[i], #pre + 5)
  end
  -- One string, whole, with its lifetime, at the first part's key: a
  -- receipt of a one-part message reads it with one GET. It replaces an
  -- older send's story of either form.
  local first = '\t' .. h.p1
  redis.call('SET', KEYS[7], cjson.encode(h), 'PX', life)
  for i = 8, #KEYS do
    if KEYS[i] ~= KEYS[7] then -- a part named as the first keeps the story
      redis.call('SET', KEYS[i], (i - 6) .. first, 'PX', life)
    end
  end
  if ARGV[14] == '1' then
    redis.call('SET', KEYS[5], '1' .. first, 'PX', life)
  end
  if ARGV[10] ~= '' and resend_life >= 1 then
    redis.call('SET', KEYS[6], ARGV[10], 'PX', resend_life)
  end
end

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
