-- gcra.lua decides one send slot on the SMS account: one call, one clock,
-- one round trip. It is what admits; penalty.lua (a 429's end) and
-- override.lua (a rate change) only move the TATs later.
--
-- KEYS[1] -> global TAT key ({sms:<account>}:tat:global), microseconds
-- KEYS[2] -> marketing TAT key ({sms:<account>}:tat:marketing), microseconds
-- KEYS[3] -> penalty key ({sms:<account>}:penalty), set by penalty.lua on a 429
-- KEYS[4] -> wake-ticket key of the caller's class ({sms:<account>}:wake:<class>)
-- KEYS[5] -> rate override hash ({sms:<account>}:override, fields target_rps
--            and marketing_rps), set by an operator to lower the rates
--            without a redeploy; a value can only lower a rate, never raise it
-- KEYS[6] -> in-flight leases ({sms:<account>}:leases), a sorted set of
--            lease members scored by expiry; a process that dies mid-send
--            leaves its lease to expire
-- ARGV[1] -> global emission interval in microseconds (1e6 / TARGET_RPS, rounded up)
-- ARGV[2] -> global tolerance tau in microseconds ((BURST - 1) * interval)
-- ARGV[3] -> marketing emission interval in microseconds
-- ARGV[4] -> marketing tolerance tau in microseconds
-- ARGV[5] -> '1' when the caller is marketing (check both keys), '0' for OTP
-- ARGV[6] -> recovery floor in microseconds, 0 normally: the caller has just
--            come back from its Redis-down fallback, and other processes may
--            still be sending from theirs for up to this long, so both TATs
--            are first raised to at least now + floor (never lowered)
-- ARGV[7] -> OTP reserve in microseconds: the part of the global tolerance
--            marketing may not use, so that an OTP finds a slot at once
--            even right after a marketing burst
-- ARGV[8] -> wake tickets: '0' none (the caller will not wait), '1' on a
--            denial, '2' on a denial and, when allowed, one for the
--            caller's next message of the class
-- ARGV[9] -> ticket spacing in microseconds (the class's interval)
-- ARGV[10] -> the longest the caller will wait, in microseconds: a ticket
--            further away is not taken (it would be wasted)
-- ARGV[11] -> the most sends in flight on the account (0: no limit)
-- ARGV[12] -> the lease member of this send (unique per attempt)
-- ARGV[13] -> lease lifetime in microseconds (longer than a send can take)
-- ARGV[14] -> cost: how many units (messages, or segments when rates count
--            segments) this send takes, at least 1. A send goes when its
--            first unit would (TAT - now <= tau, whatever its cost) and
--            moves the TAT by all of them: a long message waits behind no
--            stream of short ones, and any window of length W holds at
--            most rate * W + BURST - 1 + cost units
--
-- Returns {allowed, wait_us, reason}:
--   allowed -> 1 when a slot was taken, 0 when denied
--   wait_us -> when denied, microseconds until the caller should ask again
--              (its wake ticket, or the time until a slot may open); when
--              allowed with ARGV[8] = '2', when to ask for the next
--              message (may be <= 0: at once); else 0
--   reason  -> 0 allowed, 1 penalty live, 2 global rate, 3 marketing cap,
--              4 in-flight limit, 5 account-level pause live (a penalty
--              whose value starts with 'account'), followed by a fourth
--              element: that value, the pause's why
--
-- The clock is Redis TIME, never the caller's. A denial never advances a
-- TAT (it may take a wake ticket, and a recovery floor raises both TATs
-- before anything is decided): a marketing call updates both only when both
-- have room.
--
-- Wake tickets spread the waiters of all processes over the coming slots,
-- one interval apart, instead of waking them all when the next slot opens
-- (where one wins and the rest pay a call for nothing). A ticket is a hint
-- of when to ask, never a slot: the TATs alone decide.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])

-- px returns the lifetime in milliseconds of a key that must outlive the
-- instant until_us: 1 s past it, and 1 s when it has already passed. A
-- wake ticket's instant can lie more than 1 s in the past when the
-- tolerance is long (a large BURST, or an override scaling it), and Redis
-- refuses SET PX <= 0 (PEXPIRE <= 0 deletes the key) after the writes
-- before it, which a script does not roll back.
local function px(until_us)
  return math.max(math.ceil((until_us - now) / 1000), 0) + 1000
end

local tickets = ARGV[8]

-- An operator's override lowers the rates: longer intervals, and the
-- tolerances scaled with them (the same BURST).
local g_int, g_tau0 = tonumber(ARGV[1]), tonumber(ARGV[2])
local m_int, m_tau = tonumber(ARGV[3]), tonumber(ARGV[4])
local reserve, spacing = tonumber(ARGV[7]), tonumber(ARGV[9])
local o = redis.call('HMGET', KEYS[5], 'target_rps', 'marketing_rps')
local o_g, o_m = tonumber(o[1]), tonumber(o[2])
if o_g and o_g > 0 and math.ceil(1000000 / o_g) > g_int then
  local f = math.ceil(1000000 / o_g) / g_int
  g_int, g_tau0, reserve = math.ceil(g_int * f), math.ceil(g_tau0 * f), math.ceil(reserve * f)
  if ARGV[5] ~= '1' then
    spacing = g_int
  end
end
if o_m and o_m > 0 and math.ceil(1000000 / o_m) > m_int then
  local f = math.ceil(1000000 / o_m) / m_int
  m_int, m_tau = math.ceil(m_int * f), math.ceil(m_tau * f)
  if ARGV[5] == '1' then
    spacing = m_int
  end
end

-- ticket returns when the caller should ask, in microseconds from now: the
-- next free hint at or after open (at most 1 s past it), and takes it.
local function ticket(open)
  local w = tonumber(redis.call('GET', KEYS[4]) or 0)
  if w < open then
    w = open
  elseif w > open + 1000000 then
    w = open + 1000000
  end
  if w - now > tonumber(ARGV[10]) then
    return open - now
  end
  local nextw = w + spacing
  redis.call('SET', KEYS[4], string.format('%d', nextw), 'PX', px(nextw))
  return w - now
end

local function deny(wait, reason)
  if tickets ~= '0' then
    wait = ticket(now + wait)
  end
  return {0, wait, reason}
end

local pen = redis.call('PTTL', KEYS[3])
if pen > 0 then
  local why = redis.call('GET', KEYS[3]) or ''
  if string.sub(why, 1, 7) == 'account' then
    local d = deny(pen * 1000, 5)
    d[4] = why
    return d
  end
  return deny(pen * 1000, 1)
end

local floor = tonumber(ARGV[6])
if floor > 0 then
  for i = 1, 2 do
    local tat = tonumber(redis.call('GET', KEYS[i]) or 0)
    if tat < now + floor then
      redis.call('SET', KEYS[i], string.format('%d', now + floor), 'PX', px(now + floor))
    end
  end
end

-- check returns the TAT after one more send of cost units and how long
-- the caller would have to wait for it (<= 0 means now).
local cost = math.max(tonumber(ARGV[14]), 1)
local function check(key, interval, tau)
  local tat = tonumber(redis.call('GET', key) or now)
  if tat < now then
    tat = now -- idle time banks no credit beyond the tolerance
  end
  return tat + cost * interval, tat - now - tau
end

local marketing = ARGV[5] == '1'
local g_tau = g_tau0
if marketing then
  g_tau = g_tau - reserve
end
local g_new, g_wait = check(KEYS[1], g_int, g_tau)
local m_new, m_wait = 0, -1
if marketing then
  m_new, m_wait = check(KEYS[2], m_int, m_tau)
end

if g_wait > 0 or m_wait > 0 then
  if m_wait > g_wait then
    return deny(m_wait, 3)
  end
  return deny(g_wait, 2)
end

-- The in-flight limit, checked once the rate allows: stale leases of dead
-- processes are reclaimed on the way in; a full set denies and writes no TAT.
local max_inflight = tonumber(ARGV[11])
if max_inflight > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[6], '-inf', now)
  if redis.call('ZCARD', KEYS[6]) >= max_inflight then
    local first = redis.call('ZRANGE', KEYS[6], 0, 0, 'WITHSCORES')
    local wait = math.min(tonumber(first[2]) - now, g_int)
    return deny(math.max(wait, 1), 4)
  end
  local ttl = tonumber(ARGV[13])
  redis.call('ZADD', KEYS[6], now + ttl, ARGV[12])
  redis.call('PEXPIRE', KEYS[6], px(now + ttl))
end

-- The key lives just past its TAT: an idle account leaves nothing behind.
redis.call('SET', KEYS[1], string.format('%d', g_new), 'PX', px(g_new))
if marketing then
  redis.call('SET', KEYS[2], string.format('%d', m_new), 'PX', px(m_new))
end
if tickets == '2' then
  local open = g_new - g_tau
  if marketing and m_new - m_tau > open then
    open = m_new - m_tau
  end
  return {1, ticket(open), 0}
end
return {1, 0, 0}
