#!lua
-- gcra.lua decides one send on the SMS account: the id's send-once claim
-- and a slot, in one call, one clock, one round trip. It is what admits;
-- penalty.lua (a 429's end) and override.lua (a rate change) only move the
-- TATs later, and finish.lua records what became of the send.
--
-- KEYS[1] -> global TAT key ({sms:<account>}:tat:global), microseconds
-- KEYS[2] -> the caller's class's ceiling TAT key ({sms:<account>}:tat:<class>),
--            microseconds; read only when ARGV[3] is not 0
-- KEYS[3] -> penalty key ({sms:<account>}:penalty), set by penalty.lua on a 429
-- KEYS[4] -> wake-ticket key of the caller's class ({sms:<account>}:wake:<class>),
--            '<next> <global>': the class's next ticket and its shadow of
--            the global TAT (below, "Wake tickets")
-- KEYS[5] -> rate override ({sms:<account>}:rate-override, '<target_rps>
--            <marketing_rps>'), set by an operator to lower the rates
--            without a redeploy; a value can only lower a rate, never raise
--            it. A rate of 0 is not overridden; one that is not a number of
--            at least min_rps (below) is ignored and reported (ignored)
-- KEYS[6] -> in-flight leases ({sms:<account>}:leases), a sorted set of
--            lease members scored by expiry; a process that dies mid-send
--            leaves its lease to expire. The key lives past its longest
--            lease, never less
-- KEYS[7] -> probe key ({sms:<account>}:probe), set by penalty.lua: while
--            it lives (a second past a penalty's end) no slot is booked
--            ahead, so that the probe after a penalty goes alone
-- KEYS[8] -> learned rate ({sms:<account>}:learned, '<rate> <low> <high>
--            <next_us> <mode> <cut_us> <pressed>'), written by penalty.lua
--            on a 429 and here as the search moves up (ARGV[19]); in force
--            while the account learns (or an operator pinned it, mode
--            'P'), and it can only lower the rates, like the override. A
--            state whose rate is not a number of at least min_rps, or
--            whose other numbers are not in [0, 2^53), is ignored and
--            reported (ignored)
-- KEYS[9] -> the id's record ({sms:<account>}:id:<id>), read when
--            ARGV[16] is not empty: the send-once claim is taken in the
--            same call
-- KEYS[10] -> the account's health ({sms:<account>}:health), written by
--            finish.lua from what the sends came to (docs/decisions.md, "An
--            account's health"): absent while healthy with no failure
--            counted, else '<mode> <fails> <timeouts> <run_start_us>
--            <probes_ok> <next_probe_us> <since_us>', mode 'h' (healthy,
--            a run of failures counted, or none: healthy again since
--            <since_us>) or 'd' (degraded; <run_start_us> is then the
--            first probe success of the run). While degraded
--            the account admits probes only: one send per ARGV[21]
--            across every process
-- KEYS[11] -> the skip of the account's route to the caller's destination
--            prefix ({sms:<account>}:skip:<prefix>, '<next_probe_us>'),
--            set by receipt.lua when the first class's messages to that
--            prefix stop arriving; read for the first class only, and
--            only by a caller that can send elsewhere. A call with no
--            prefix, or that cannot fail over, names
--            {sms:<account>}:skip:, never set. While it lives the route
--            admits probes only: one first-class send per ARGV[23] across
--            every process
-- KEYS[12..] -> the TAT keys of the earlier classes' reserves the caller's
--            class is held to ({sms:<account>}:tat:after:<class>: what the
--            classes after <class> take together), one per triple of
--            ARGV[24]; R of them
-- KEYS[12+R..] -> the wake-ticket keys of the later classes held to a
--            level the caller's class is held to (the global level, and
--            its reserves), one per interval of ARGV[25]; W of them
-- KEYS[12+R+W..] -> the sender pool's keys, none without a pool. First
--            its floor ({sms:<account>}:tat:sender:): a recovery floor
--            (ARGV[6]) raises it, and every sender's TAT counts as at
--            least it. Its name is also the prefix of each sender's TAT
--            key ({sms:<account>}:tat:sender:<from>), which the script
--            names from the indexes' members: keys of the account's hash
--            slot, so that a pool of any size costs the same keys. Then
--            the pool's indexes, one per interval of ARGV[20]
--            ({sms:<account>}:pool:<hash>:<interval>, <hash> naming the
--            pool's configuration): sorted sets of the senders of that
--            interval, each scored by a lower bound of its TAT. The
--            sender's TAT key is the truth; a score left low by another
--            configuration's sends (a rolling deploy) is mended when
--            found. pool.lua builds a missing index
-- ARGV[1] -> global emission interval in microseconds (1e6 / TARGET_RPS, rounded up)
-- ARGV[2] -> global tolerance tau in microseconds ((BURST - 1) * interval)
-- ARGV[3] -> the caller's class's ceiling emission interval in microseconds
--            (0: the class has no ceiling below the account's rate)
-- ARGV[4] -> the ceiling's tolerance tau in microseconds
-- ARGV[5] -> '1' when the override's second rate lowers the caller's
--            ceiling (the last class's), '0' otherwise
-- ARGV[6] -> recovery floor in microseconds, 0 normally: the caller has just
--            come back from its Redis-down fallback, and other processes may
--            still be sending from theirs for up to this long, so both TATs
--            are first raised to at least now + floor (never lowered)
--            (and so are the ceiling's, the reserves' and the senders')
-- ARGV[7] -> the caller's class's reserve of the global level in
--            microseconds: the part of the global tolerance it may not
--            use (0 for the first class, one interval more for each class
--            after it, at most BURST - 1), so that an earlier class finds
--            a slot at once even right after a later class's burst
-- ARGV[8] -> wake tickets: '0' none (the caller will not wait), '1' on a
--            denial, '2' or '2 <n>' on a denial and, when allowed, one for
--            the caller's next message of the class, queued behind it, of
--            n units (1 when left out). A ticket is for a send of a cost:
--            the caller's (ARGV[14]), or n; the next ticket handed out is
--            that many spacings later
-- ARGV[9] -> ticket spacing in microseconds per unit (the class's
--            interval: the longest of its levels'), lengthened as an
--            override or the learned rate lengthens them
-- ARGV[10] -> the longest the caller will wait, in microseconds: a ticket
--            further away is not taken (it would be wasted)
-- ARGV[11] -> the most sends in flight on the account (0: no limit)
-- ARGV[12] -> the lease member of this send (unique per attempt)
-- ARGV[13] -> lease lifetime in microseconds (longer than a send can take)
-- ARGV[14] -> cost: how many units (messages, or segments when rates count
--            segments) this send takes, at least 1. A send goes when its
--            first unit would (TAT - at <= tau, whatever its cost) and
--            moves the TAT by all of them: a long message waits behind no
--            stream of short ones, and any window of length W holds at
--            most rate * W + BURST - 1 + cost units
-- ARGV[15] -> lookahead in microseconds: a slot opening within this long
--            is booked now, and the caller sends when it opens (the first
--            element of the reply is then 1 and the second the wait),
--            instead of being denied and asking again
-- ARGV[16] -> claim token, unique per delivery attempt ('' takes no claim)
-- ARGV[17] -> claim lifetime in milliseconds, counted from the slot
-- ARGV[18] -> '1' to count this send in the id's record (the attempts
--            before it come back in the reply), '0' not to
-- ARGV[19] -> the learned rate's search, '' when the account does not
--            learn: '<target_rps> <min_rps> <step_us> <probe_us>'. Once
--            the learned rate's next step is due and the account was
--            pressed since the last step (a caller could not go at once),
--            the search moves up: bisection between
--            the last good and the last throttled rate while searching,
--            one small step every probe_us once settled; never above
--            target_rps
-- ARGV[20] -> the sender pool's emission intervals in microseconds, one
--            per index of KEYS[12+R+W..], space-separated ('' for no
--            pool). Each send also takes a slot of the sender whose slot
--            opens first: in each index the one of the lowest score (a
--            sorted set's first, O(log N)), whose TAT is read from its key;
--            of the indexes' firsts, the one whose slot opens first. A send
--            of cost c goes when sender TAT + (c - 1) * interval <= at and
--            moves that TAT to max(TAT, at) + c * interval, so that any
--            interval * rate window of the sender holds at most rate units
--            (a send of more units than that goes alone)
-- ARGV[21] -> the probe interval of a degraded account, in microseconds
-- ARGV[22] -> '1' when the caller can send elsewhere (failover): a
--            degraded account denies it at once, and leaves each probe to
--            callers that cannot until it has been due for a probe
--            interval (so that a home whose every caller fails over is
--            still probed, at half the rate)
-- ARGV[23] -> the probe interval of a skipped route, in microseconds
-- ARGV[24] -> the reserves the caller's class is held to, one
--            '<interval> <tau> <reserve>' triple per reserve key of
--            KEYS[12..] (space-separated, '' for none), in microseconds:
--            the rate the classes after an earlier class may take
--            together, and the part of its tolerance the caller may not
--            use (none for the first class after that class, one interval
--            more for each class after it), so that of two classes held
--            to the same reserve the earlier is never kept waiting by the
--            later
-- ARGV[25] -> the push of each wake ticket of KEYS[12+R..], in
--            microseconds per unit, space-separated ('' for none): an
--            admission takes a slot of a reserve a later class shares,
--            which that class's next ticket would otherwise point at, so
--            its next ticket is pushed one slot later (0: the class shares
--            no reserve with the caller's). It takes a slot of the global
--            level too: each later class's shadow of the global TAT moves
--            by the send's units, as the TAT does
-- ARGV[26] -> the probe interval of a degraded account for a caller that
--            hedges its send (one that another account takes over if
--            this one does not answer soon), in microseconds; 0 for
--            other callers. Such a caller takes a probe once this long
--            has passed since the last probe (the next probe of the
--            others is due ARGV[21] after it), so that a hedged first
--            class finds a provider answering again within this, at the
--            cost of the hedge's wait for each probe that finds it not
--
-- Returns {allowed, wait_us, reason, next_us, attempts, detail, sender,
-- learned, ignored, health}, and when allowed slot_us:
--   allowed  -> 1 when a slot was taken (and the claim, if asked), 0 when denied
--   wait_us  -> allowed: microseconds until the booked slot opens (0: now);
--               denied: until the caller should ask again (its wake
--               ticket, or the time until a slot may open)
--   reason   -> 0 allowed, 1 penalty live, 2 global rate, 3 the class's
--               ceiling,
--               4 in-flight limit, 5 account-level pause live (a penalty
--               whose value starts with 'account'), 6 the id's record says
--               not to send (another attempt holds its claim, or it has a
--               final record)
--   next_us  -> when allowed with ARGV[8] = '2', when to ask for the next
--               message (may be <= 0: at once); else 0
--   attempts -> the sends of the id counted before this one (ARGV[18])
--   detail   -> reason 5: the pause's why; reason 6: 'held', or the record
--               ('sent', 'sent:<provider id>', 'rejected', 'refused:<why>');
--               else ''
--   sender   -> allowed with a pool: the From of the sender taken; else ''
--   learned  -> the learned rate in force, in thousandths of a unit per
--               second (0: none, the configured rates hold)
--   ignored  -> what was read from Redis and ignored: 1 the override
--               (KEYS[5]), 2 the learned rate's state (KEYS[8]), 3 both,
--               0 nothing
--   health   -> the account's health (KEYS[10]): 0 healthy, 1 healthy
--               with a run of failures counted (a success ends it: the
--               caller reports it to finish.lua), 2 degraded (an allowed
--               send is a probe)
--   slot_us  -> allowed: when the booked slot opens, on Redis's clock
--               (microseconds since the epoch): finish.lua dates the
--               send's story by it
--
-- Reason 7 is a denial by the sender pool: no sender opens within the
-- lookahead; wait_us is then when the first one opens. Reason 8 is a
-- degraded account's denial: wait_us is until its next probe. Reason 9 is
-- a skipped route's denial (KEYS[11]): wait_us is until its next probe.
-- Reason 10 is a denial by an earlier class's reserve (KEYS[12..]).
-- Reason 11 says that an index of the sender pool is missing (never
-- built, expired, or Redis lost it): nothing was decided, and the caller
-- builds it with pool.lua and asks again.
--
-- An id's record is '<state>' or, once its sends are counted,
-- '<attempts>#<state>'; the state '' (a claim given back, its count kept)
-- is free to claim.
--
-- The lowest rate an override or a learned rate may set is min_rps
-- (admission.MinRPS, one unit in 100 s): a lower one would be an interval
-- no integer here can hold, and would let every send through. Every
-- number written is a whole number in [0, 2^53), where a Lua number is
-- still exact.
--
-- The clock is Redis TIME, never the caller's. A denial never advances a
-- TAT and writes no claim (it may take a wake ticket, and a recovery floor
-- raises both TATs before anything is decided); a duplicate takes no slot.
-- The account's keys are read in one MGET and written in one MSET (a
-- sender pool adds, per index, a ZRANGE of its first and a GET of that
-- sender's TAT, then the SET and ZADD of the one taken): they need no
-- expiry, since a TAT or ticket in the past means the same as none and
-- they are a fixed few. A sender's TAT, one per number the pool ever
-- held, lives a second past itself.
--
-- Wake tickets spread the waiters of all processes over the coming slots,
-- each the cost of the one before it apart (a 3-segment send takes three
-- intervals of the TATs, and so does its ticket), instead of waking them all
-- when the next slot opens (where one wins and the rest pay a call for
-- nothing). A ticket is a hint
-- of when to ask, never a slot: the TATs alone decide, and the lookahead
-- lets a waiter that wakes a little early book its slot rather than miss it.
-- A class below the account's rate (marketing's ceiling) shares the global
-- level with the earlier classes, whose sends take its slots there: its
-- tickets, spaced by its own interval, would run ahead of its slots and
-- every waiter that came too early would ask twice. So a wake-ticket key
-- also keeps the class's shadow of the global TAT: the real one, plus the
-- units of the tickets handed out since, plus what the earlier classes'
-- admissions took meanwhile (they push it by their sends' units). A
-- ticket is the later of the class's next one and when the shadow lets
-- its first unit go (for a class held below the account's rate only: one
-- at the global level's interval follows it already); a shadow behind the
-- real TAT counts as it.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local tickets, capped = ARGV[8], ARGV[3] ~= '0'
local cost = math.max(tonumber(ARGV[14]), 1)
-- The cost of the caller queued behind this one ('2 <n>'), which the next
-- ticket is for: 1 when not given. (Matched into a local first: a Lua
-- whose failed match returns no value at all would leave tonumber none.)
local next_cost = string.match(tickets, '^2 (%d+)$')
next_cost = math.max(tonumber(next_cost or '1'), 1)
local token = ARGV[16]
local min_rps, max_us = 0.01, 2 ^ 53 - 1
local ignored = 0

-- rate returns v read as a rate in force, nil unless it is a number of at
-- least min_rps (NaN and inf are not).
local function rate(v)
  v = tonumber(v)
  if v and v >= min_rps and v < math.huge then
    return v
  end
  return nil
end
-- num returns v read as a count or an instant, nil unless it is a number in
-- [0, max_us] (NaN and inf are not: a hand-typed 'nan' TAT would admit
-- once and then be written as max_us). Every number read from Redis goes
-- through it, as in override.lua.
local function num(v)
  v = tonumber(v)
  if v and v >= 0 and v <= 2 ^ 53 - 1 then
    return v
  end
  return nil
end

-- Every key in one MGET: s[i] is KEYS[i]'s value (nil for the leases,
-- a sorted set).
local s = redis.call('MGET', unpack(KEYS))

-- The account's health: a degraded account admits probes only.
local health, probe_due = 0, 0
local hv = s[10] and {string.match(s[10], '^([hd]) (%d+) (%d+) (%d+) (%d+) (%d+) (%d+)$')}
if hv and hv[1] then
  if hv[1] == 'd' then
    health, probe_due = 2, num(hv[6]) or 0
  elseif hv[2] ~= '0' then
    health = 1 -- else healthy again, kept for finish.lua's rule of old sends
  end
end

-- What is written back, in one MSET at the end.
local out = {}
local function clamp(v)
  if not (v < max_us) then
    return max_us -- a TAT that far ahead denies, as the one it stands for would
  elseif v < 0 then
    return 0
  end
  return v
end
local function put(key, v)
  out[#out + 1] = key
  out[#out + 1] = string.format('%d', clamp(v))
end
-- A wake-ticket key holds '<next> <global>': the next ticket of the class,
-- and the shadow of the global TAT its waiters' sends will take: the real
-- one, plus the units of the tickets handed out, plus what earlier
-- classes took since (their admissions push it). A value of one number
-- (a version before the shadow) is the next ticket alone.
local function wake(v)
  local w, g = string.match(v or '', '^(%d+) (%d+)$')
  if w then
    return num(w) or 0, num(g) or 0
  end
  return num(v) or 0, 0
end
local function put_wake(key, w, g)
  out[#out + 1] = key
  out[#out + 1] = string.format('%d %d', clamp(w), clamp(g))
end

-- The reserves the caller's class is held to: KEYS[12..11 + #res].
local res = {}
for iv, tau, r in string.gmatch(ARGV[24], '(%d+) (%d+) (%d+)') do
  local k = 12 + #res
  res[#res + 1] = {int = tonumber(iv), tau = tonumber(tau), reserve = tonumber(r), key = k,
    tat = math.max(num(s[k]) or 0, now)}
end
-- The later classes' wake tickets: KEYS[12 + #res..].
local pushes = {}
for v in string.gmatch(ARGV[25], '%d+') do
  pushes[#pushes + 1] = tonumber(v)
end
local senders = 12 + #res + #pushes -- the pool's floor key, then its indexes
local pool = ARGV[20] ~= ''

local tat_g, tat_m = math.max(num(s[1]) or 0, now), math.max(num(s[2]) or 0, now)
local floor = tonumber(ARGV[6])
if floor > 0 then
  -- Raised before anything is decided, and kept whatever is.
  if tat_g < now + floor then
    tat_g = now + floor
    put(KEYS[1], tat_g)
  end
  if capped and tat_m < now + floor then
    tat_m = now + floor
    put(KEYS[2], tat_m)
  end
  for _, v in ipairs(res) do
    if v.tat < now + floor then
      v.tat = now + floor
      put(KEYS[v.key], v.tat)
    end
  end
  if pool and (num(s[senders]) or 0) < now + floor then
    s[senders] = now + floor
    put(KEYS[senders], s[senders])
  end
end

-- The learned rate, in force while the account learns or an operator
-- pinned it (a state left by a learning configuration is inert).
local adaptive = ARGV[19]
local lrn, learned = nil, 0
if s[8] then
  local r, lo, hi, nx, mode, cut, pr = string.match(s[8], '^(%S+) (%S+) (%S+) (%S+) (%S+) (%S+) (%S+)$')
  lrn = {rate = rate(r), lo = num(lo), hi = num(hi), next = num(nx), mode = mode, cut = num(cut), pressed = pr == '1'}
  if mode and adaptive == '' and mode ~= 'P' then
    lrn = nil -- inert: left by a learning configuration
  elseif not (lrn.rate and lrn.lo and lrn.hi and lrn.next and lrn.cut and string.match(mode, '^[supP]$')) then
    lrn, ignored = nil, 2
  elseif math.ceil(1000000 / lrn.rate) > tonumber(ARGV[1]) then
    learned = math.floor(lrn.rate * 1000) -- in force: below the configured rate
  end
end
-- learned_state writes the learned rate's state in the MSET.
local function learned_state(r, mode, nx, pressed)
  out[#out + 1] = KEYS[8]
  out[#out + 1] = string.format('%.3f %.3f %.3f %d %s %d %d', r, lrn.lo, lrn.hi, nx, mode, lrn.cut, pressed and 1 or 0)
end

-- Then the id's record: a duplicate takes nothing (the floor above is no
-- slot, and is kept).
local attempts = 0
if token ~= '' and s[9] then
  local n, state = string.match(s[9], '^(%d+)#(.*)$')
  if n then
    attempts = num(n) or 0
  else
    state = s[9]
  end
  if state ~= '' and state ~= 'claim:' .. token then
    if string.sub(state, 1, 6) == 'claim:' then
      state = 'held'
    end
    if #out > 0 then
      redis.call('MSET', unpack(out))
    end
    return {0, 0, 6, 0, attempts, state, '', learned, ignored, health}
  end
end

-- An operator's override lowers the rates: longer intervals, and the
-- tolerances scaled with them (the same BURST).
local g_int, g_tau0 = tonumber(ARGV[1]), tonumber(ARGV[2])
local m_int, m_tau = tonumber(ARGV[3]), tonumber(ARGV[4])
local reserve, spacing = tonumber(ARGV[7]), tonumber(ARGV[9])
if s[5] then
  local a, b = string.match(s[5], '^(%S*) (%S*)$')
  local o_g, o_m = tonumber(a), tonumber(b)
  if not a or (o_g ~= 0 and not rate(o_g)) or (o_m ~= 0 and not rate(o_m)) then
    ignored = ignored + 1
  end
  o_g, o_m = rate(o_g), rate(o_m) -- 0, or one ignored: that rate is not overridden
  if o_g and o_g > 0 and math.ceil(1000000 / o_g) > g_int then
    -- The reserves in proportion, so that the earlier classes keep their
    -- share of the lowered rate.
    local f = math.ceil(1000000 / o_g) / g_int
    g_int, g_tau0, reserve = math.ceil(g_int * f), math.ceil(g_tau0 * f), math.ceil(reserve * f)
    for _, v in ipairs(res) do
      v.int, v.tau, v.reserve = math.ceil(v.int * f), math.ceil(v.tau * f), math.ceil(v.reserve * f)
    end
    for i, p in ipairs(pushes) do
      pushes[i] = math.ceil(p * f)
    end
  end
  if ARGV[5] == '1' and o_m and o_m > 0 and math.ceil(1000000 / o_m) > m_int then
    local f = math.ceil(1000000 / o_m) / m_int
    m_int, m_tau = math.ceil(m_int * f), math.ceil(m_tau * f)
  end
end

-- The learned rate lowers the account's rate as the override does, and
-- the ceilings and reserves in proportion, so that every class keeps its
-- share.
if lrn then
  local iv = math.ceil(1000000 / lrn.rate)
  if iv > g_int then
    local f = iv / g_int
    g_int, g_tau0, reserve = iv, math.ceil(g_tau0 * f), math.ceil(reserve * f)
    m_int, m_tau = math.ceil(m_int * f), math.ceil(m_tau * f)
    for _, v in ipairs(res) do
      v.int, v.tau, v.reserve = math.ceil(v.int * f), math.ceil(v.tau * f), math.ceil(v.reserve * f)
    end
    for i, p in ipairs(pushes) do
      pushes[i] = math.ceil(p * f)
    end
  end
end
-- Tickets are spaced by the class's longest interval in force.
spacing = math.max(spacing, g_int)
if capped then
  spacing = math.max(spacing, m_int)
end
for _, v in ipairs(res) do
  spacing = math.max(spacing, v.int)
end

-- ticket returns when the caller should ask, in microseconds from now: the
-- next free hint at or after open (at most 1 s per unit past it: a stale
-- hint far ahead is not followed), and takes it for a send of units: the
-- next hint is that many slots later, when the slot after this send opens
-- if no earlier class takes a slot meanwhile.
-- The global level's shadow g (below) holds the ticket back too: the
-- first unit goes once g - tau allows it, and the send adds its units.
local function ticket(open, units)
  local w, g = wake(s[4])
  g = math.max(g, tat_g)
  w = math.max(w, open)
  if spacing > g_int then
    -- Only a class held below the account's rate: one whose tickets are
    -- spaced by the global level's interval already follow it, and a
    -- shadow left ahead by a waiter that asked twice would only leave
    -- slots empty (a pool's waiters ask again as its senders open).
    w = math.max(w, g - (g_tau0 - reserve))
  end
  if w > open + units * 1000000 then
    w = open + units * 1000000
  end
  if w - now > tonumber(ARGV[10]) then
    return open - now
  end
  put_wake(KEYS[4], w + units * spacing, g + units * g_int)
  return w - now
end

local function deny(wait, reason, detail)
  if tickets ~= '0' then
    wait = ticket(now + wait, cost)
  end
  if #out > 0 then
    redis.call('MSET', unpack(out))
  end
  return {0, wait, reason, 0, attempts, detail or '', '', learned, ignored, health}
end

if s[3] then
  local pen = redis.call('PTTL', KEYS[3])
  if pen > 0 then
    if string.sub(s[3], 1, 7) == 'account' then
      return deny(pen * 1000, 5, s[3])
    end
    return deny(pen * 1000, 1)
  end
end

-- A degraded account: one probe per interval, taken below once the rates
-- admit it; a caller that can send elsewhere waits one interval more.
if health == 2 then
  local due = probe_due
  local hedged = tonumber(ARGV[26]) or 0
  if hedged > 0 then
    due = due - tonumber(ARGV[21]) + hedged
  elseif ARGV[22] == '1' then
    due = due + tonumber(ARGV[21])
  end
  if now < due then
    if #out > 0 then
      redis.call('MSET', unpack(out))
    end
    return {0, due - now, 8, 0, attempts, '', '', learned, ignored, health}
  end
end

-- A skipped route: the first class to the caller's prefix gets one probe
-- per interval, as a degraded account; other classes go as they would.
-- Only callers that can send elsewhere name the key (KEYS[11]).
local route_due = num(s[11])
if route_due and route_due > now then
  if #out > 0 then
    redis.call('MSET', unpack(out))
  end
  return {0, route_due - now, 9, 0, attempts, '', '', learned, ignored, health}
end


-- The search moves up once its step is due, and only if the account was
-- pressed since the last step (a caller could not go at once: below): a
-- rate no traffic pressed against proves nothing. Mode 's' searches
-- (bisection between the last good rate, lo, and the last throttled one,
-- hi), 'u' tries one step above a settled rate, 'p' is settled, 'P' pinned
-- by an operator.
local searching = lrn and adaptive ~= '' and lrn.mode ~= 'P'
if searching and now >= lrn.next and lrn.pressed then
  local a_target, a_min, a_step, a_probe = string.match(adaptive, '^(%S+) (%S+) (%S+) (%S+)$')
  a_target, a_min, a_step, a_probe = tonumber(a_target), tonumber(a_min), tonumber(a_step), tonumber(a_probe)
  local r, mode, nx = lrn.rate, lrn.mode, now + a_step
  if mode == 's' then
    lrn.lo = r
    if lrn.hi > r and lrn.hi - r > math.max(1, 0.05 * lrn.hi) then
      r = (r + lrn.hi) / 2
    else
      mode, nx = 'p', now + a_probe
    end
  elseif mode == 'u' then
    lrn.lo, mode, nx = r, 'p', now + a_probe
  else
    r, mode = lrn.lo + math.max(1, 0.05 * lrn.lo), 'u'
  end
  r = math.max(math.min(r, a_target), a_min)
  if r >= a_target and mode == 'p' then
    -- Proven at the target: nothing left to learn.
    redis.call('DEL', KEYS[8])
    learned, searching = 0, false
  else
    learned_state(r, mode, nx, false)
    lrn.rate, lrn.mode, lrn.next, lrn.pressed = r, mode, nx, false
    learned = 0
    if r < a_target then
      learned = math.floor(r * 1000) -- a trial at the target is the target
    end
  end
end
-- press records that a caller could not go at once: the rate in force was
-- pressed against (once a step: the flag is written when it changes).
local function press()
  if searching and not lrn.pressed then
    lrn.pressed = true
    learned_state(lrn.rate, lrn.mode, lrn.next, true)
  end
end

-- The slot: the first instant at which every level the caller passes has
-- room, at the earliest now. Idle time banks no credit beyond the
-- tolerance (a TAT in the past counts as now).
local g_tau = g_tau0 - reserve
local g_wait, m_wait, r_wait = tat_g - now - g_tau, -1, -1
if capped then
  m_wait = tat_m - now - m_tau
end
for _, v in ipairs(res) do
  r_wait = math.max(r_wait, v.tat - now - (v.tau - v.reserve))
end
-- The sender whose slot opens first, when the account has a pool: each
-- index's first, its TAT read from its key. A score below that TAT (the
-- sender went through another configuration's index) is mended and the
-- index read again, a few times at most; past that the first found is
-- taken at its true TAT, which keeps every sender within its rate.
local pick, s_wait, s_int, s_tat, s_key = nil, -1, 0, 0, 0
if pool then
  local pfloor = num(s[senders]) or 0
  local g = 0
  for v in string.gmatch(ARGV[20], '%d+') do
    g = g + 1
    local k, iv, m, tat = senders + g, tonumber(v), nil, 0
    for _ = 1, 4 do
      local top = redis.call('ZRANGE', KEYS[k], 0, 0, 'WITHSCORES')
      if not top[1] then
        if #out > 0 then
          redis.call('MSET', unpack(out))
        end
        return {0, 0, 11, 0, attempts, '', '', learned, ignored, health}
      end
      m = top[1]
      tat = math.max(num(redis.call('GET', KEYS[senders] .. m)) or 0, pfloor)
      if tat <= math.max(num(top[2]) or 0, now, pfloor) then
        break -- no other sender of the index opens earlier
      end
      redis.call('ZADD', KEYS[k], tat, m)
    end
    local w = tat + (cost - 1) * iv - now
    if not pick or w < s_wait then
      pick, s_wait, s_int, s_tat, s_key = m, w, iv, tat, k
    end
  end
end
local wait, lookahead = math.max(g_wait, m_wait, r_wait, s_wait, 0), tonumber(ARGV[15])
if s[7] then
  lookahead = 0
end
if wait > lookahead then
  if s_wait > math.max(g_wait, m_wait, r_wait) then
    return deny(s_wait, 7)
  end
  press()
  if m_wait > g_wait and m_wait >= r_wait then
    return deny(m_wait, 3)
  end
  if r_wait > g_wait then
    return deny(r_wait, 10)
  end
  return deny(g_wait, 2)
end
if math.max(g_wait, m_wait, r_wait) > 0 then
  press() -- booked ahead: it could not go at once
end
local at = now + wait

-- The in-flight limit, checked once the rate allows: stale leases of dead
-- processes are reclaimed on the way in; a full set denies and writes no TAT.
local max_inflight = tonumber(ARGV[11])
if max_inflight > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[6], '-inf', now)
  if redis.call('ZCARD', KEYS[6]) >= max_inflight then
    local first = redis.call('ZRANGE', KEYS[6], 0, 0, 'WITHSCORES')
    return deny(math.max(math.min((num(first[2]) or max_us) - now, g_int), 1), 4)
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

-- Each level's TAT moves past the slot by the send's cost.
tat_g = math.max(tat_g, at) + cost * g_int
put(KEYS[1], tat_g)
local open = tat_g - g_tau
if capped then
  tat_m = math.max(tat_m, at) + cost * m_int
  put(KEYS[2], tat_m)
  open = math.max(open, tat_m - m_tau)
end
for _, v in ipairs(res) do
  v.tat = math.max(v.tat, at) + cost * v.int
  put(KEYS[v.key], v.tat)
  open = math.max(open, v.tat - (v.tau - v.reserve))
end
for i, p in ipairs(pushes) do
  local k = 11 + #res + i
  local w, g = wake(s[k])
  if (p > 0 and w > now) or g > now then
    if p > 0 and w > now then
      w = w + cost * p
    end
    if g > now then
      g = g + cost * g_int -- every later class shares the global level
    end
    put_wake(KEYS[k], w, g)
  end
end
if pick then
  -- A sender's TAT lives a second past itself, as penalty.lua's and
  -- override.lua's do: the key of a sender since removed from the pool
  -- goes away (a TAT in the past means the same as none).
  local keep_ms = 1000
  local v = math.min(math.max(s_tat, at) + cost * s_int, max_us)
  redis.call('SET', KEYS[senders] .. pick, string.format('%d', v), 'PX', math.max(math.ceil((v - now) / 1000), 0) + keep_ms)
  redis.call('ZADD', KEYS[s_key], v, pick)
end
local nxt = 0
if string.sub(tickets, 1, 1) == '2' then
  nxt = ticket(open, next_cost)
end
redis.call('MSET', unpack(out))
if health == 2 then
  -- This send is the probe: the next one is due an interval after it.
  redis.call('SET', KEYS[10], string.format('d %s %s %s %s %d %s', hv[2], hv[3], hv[4], hv[5],
    math.min(at + tonumber(ARGV[21]), max_us), hv[7]), 'KEEPTTL')
end
if route_due then
  -- This send is the route's probe: the next one is due an interval after.
  redis.call('SET', KEYS[11], string.format('%d', math.min(at + tonumber(ARGV[23]), max_us)), 'KEEPTTL')
end

if token ~= '' then
  local n = attempts
  if ARGV[18] == '1' then
    n = n + 1
  end
  local v = 'claim:' .. token
  if n > 0 then
    v = n .. '#' .. v
  end
  redis.call('SET', KEYS[9], v, 'PX', math.ceil(wait / 1000) + math.max(tonumber(ARGV[17]), 1))
end
return {1, wait, 0, nxt, attempts, '', pick or '', learned, ignored, health, at}
