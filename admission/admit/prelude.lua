-- prelude.lua opens every composed admission script (compose.go): Redis's
-- clock, the arguments every part reads, the shared helpers, one MGET of
-- the account's keys, and the state the parts share, each with the value
-- it has when the part that sets it is left out of the script.
--
-- KEYS[1] -> global TAT key ({sms:<account>}:tat:global), microseconds
-- ARGV[1] -> global emission interval in microseconds (1e6 / TARGET_RPS, rounded up)
-- ARGV[2] -> global tolerance tau in microseconds ((BURST - 1) * interval)
-- ARGV[7] -> the caller's class's reserve of the global level in
--            microseconds: the part of the global tolerance it may not
--            use (0 for the first class, one interval more for each class
--            after it, at most BURST - 1), so that an earlier class finds
--            a slot at once even right after a later class's burst
-- ARGV[14] -> cost: how many units (messages, or segments when rates count
--            segments) this send takes, at least 1. A send goes when its
--            first unit would (TAT - at <= tau, whatever its cost) and
--            moves the TAT by all of them: a long message waits behind no
--            stream of short ones, and any window of length W holds at
--            most rate * W + BURST - 1 + cost units
-- ARGV[15] -> lookahead in microseconds: a slot opening within this long
--            is booked now (allowed, with the wait), instead of a denial
--
-- The lowest rate an override or a learned rate may set is min_rps
-- (admission.MinRPS, one unit in 100 s): a lower one would be an interval
-- no integer here can hold, and would let every send through. Every
-- number written is a whole number in [0, 2^53), where a Lua number is
-- still exact. The clock is Redis TIME, never the caller's.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local cost = math.max(tonumber(ARGV[14]), 1)
local min_rps, max_us = 0.01, 2 ^ 53 - 1

--@num

-- Every key in one MGET: s[i] is KEYS[i]'s value (nil for the leases,
-- a sorted set). The lists of keys start at KV (variant.go's layout).
local s = redis.call('MGET', unpack(KEYS))
--@layout

-- What is written back, in one MSET at the end (no expiry: a TAT or
-- ticket in the past means none, and they are a fixed few).
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

-- The state the parts share. The levels: the global one's TAT and rate
-- in force (after an override or the learned rate lowered it), then the
-- ceiling's, the reserves' and the sender pool's, -1 waits when absent.
local tat_g, g_int, g_tau0 = 0, tonumber(ARGV[1]), tonumber(ARGV[2])
local reserve, spacing = tonumber(ARGV[7]), 0 -- spacing: wake.lua's
local capped, tat_m, m_int, m_tau = false, 0, 0, 0
local res, pushes = {}, {} -- the reserves' levels, the later classes' ticket pushes
local g_wait, m_wait, r_wait, s_wait = 0, -1, -1, -1
local lookahead, open, nxt = tonumber(ARGV[15]), 0, 0
local pool, senders, pick = false, 0, nil
-- What the reply says besides the decision (rewrite.go's reply table).
local attempts, learned, ignored, health = 0, 0, 0, 0
--@reply
-- A wake-ticket key holds '<next> <global>': the next ticket of the class
-- and its shadow of the global TAT (wake.lua). A value of one number (a
-- version before the shadow) is the next ticket alone.
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
-- ticket (wake.lua) returns when a denied caller should ask again, in
-- microseconds from now; press (search.lua) notes that the rate in force
-- was pressed against. Each is nil in a script without its part.
local ticket, press

-- rate returns v read as a rate in force, nil unless it is a number of at
-- least min_rps (NaN and inf are not). scale lowers the account's rate in
-- proportion f (> 1) for what shares it: the global tolerance, the
-- caller's reserve of it, the earlier classes' reserves and the pushes of
-- the later classes' tickets, so that every class keeps its share of the
-- lowered rate. Only a value of the override (override.lua) or of the
-- learned rate (learned.lua) needs them: they are made only when one is
-- set, as Lua makes a script's functions anew on every call.
local rate, scale
if s[5] or s[8] then
  rate = function(v)
    v = tonumber(v)
    if v and v >= min_rps and v < math.huge then
      return v
    end
    return nil
  end
  scale = function(f)
    g_tau0, reserve = math.ceil(g_tau0 * f), math.ceil(reserve * f)
    for _, v in ipairs(res) do
      v.int, v.tau, v.reserve = math.ceil(v.int * f), math.ceil(v.tau * f), math.ceil(v.reserve * f)
    end
    for i, p in ipairs(pushes) do
      pushes[i] = math.ceil(p * f)
    end
  end
end

-- stop ends a call that takes no slot: what was written so far (a
-- recovery floor, a wake ticket, the learned rate's state) is kept. deny
-- is stop for a caller that may wait: it takes a wake ticket when it
-- asked for one (the script then has wake.lua). Neither is a function,
-- which every call would pay to make: a part ends with one as a
-- "return stop(...)" or "return deny(...)" of (wait, reason[, detail]),
-- and the composer writes the lines below in its place, the arguments
-- made locals of those names (rewrite.go's endCalls).
--@deny(wait, reason, detail)
if ticket then
  wait = ticket(now + wait, cost)
end
--@stop(wait, reason, detail)
if #out > 0 then
  redis.call('MSET', unpack(out))
end
return reply(0, wait, reason, 0, detail or '', '', 0)
--@end
