#!lua
-- penalty.lua records the provider's Retry-After so that every process stops.
--
-- KEYS[1] -> penalty key ({sms:<account>}:penalty)
-- KEYS[2] -> global TAT key ({sms:<account>}:tat:global)
-- KEYS[3] -> probe key ({sms:<account>}:probe): lives 1 s past the
--            penalty's end, and while it does the admission script books no slot ahead
-- KEYS[4] -> learned rate ({sms:<account>}:learned), see the admission script
-- KEYS[5] -> rate override ({sms:<account>}:rate-override)
-- ARGV[1] -> penalty length in milliseconds (below 1 counts as 1)
-- ARGV[2] -> global tolerance tau in microseconds
-- ARGV[3] -> why: 'throttled' for a 429, 'account:<reason>' for an
--            account-level failure (the admission script then answers ACCOUNT)
-- ARGV[4] -> the learned rate's search, as the admission script's ARGV[19] ('' when
--            the account does not learn)
--
-- Returns {remaining milliseconds, why} of the penalty after the call. A shorter
-- penalty never shortens a longer live one. An account-level why is never
-- replaced by a 429's: the account pause is the graver, and it is what a
-- fixed credential ends (resume.lua); an account-level failure during a
-- longer 429 penalty makes that penalty an account pause.
--
-- The global TAT is also moved to the penalty's end plus tau: when the
-- penalty ends the account resumes one message per interval, with no burst,
-- so that a provider still refusing sees one probe per Retry-After, not one
-- per waiting process; and for a second after it no slot is booked ahead,
-- so that no second send is already on its way when the probe's answer
-- comes back.

local want = math.max(tonumber(ARGV[1]), 1) -- SET PX refuses <= 0
local cur = redis.call('PTTL', KEYS[1])
local account = string.sub(ARGV[3], 1, 7) == 'account'
local why = ARGV[3]
if not account and cur > 0 then
  local live = redis.call('GET', KEYS[1]) or ''
  if string.sub(live, 1, 7) == 'account' then
    why = live
  end
end
if cur < want then
  redis.call('SET', KEYS[1], why, 'PX', want)
  cur = want
elseif account then
  redis.call('SET', KEYS[1], why, 'KEEPTTL')
else
  why = redis.call('GET', KEYS[1]) or why
end
redis.call('SET', KEYS[3], '1', 'PX', cur + 1000)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])

-- px returns the lifetime in milliseconds of a key that must outlive the
-- instant until_us: 1 s past it, and never less than 1 s (SET PX refuses
-- <= 0, after the penalty was written).
local function px(until_us)
  return math.max(math.ceil((until_us - now) / 1000), 0) + 1000
end

-- As in the admission script: a rate below min_rps, or a number past 2^53, read from
-- Redis is ignored.
local min_rps, max_us = 0.01, 2 ^ 53 - 1
--@num

local tat = now + cur * 1000 + tonumber(ARGV[2])
if (num(redis.call('GET', KEYS[2])) or 0) < tat then
  redis.call('SET', KEYS[2], string.format('%d', tat), 'PX', px(tat))
end
-- A 429 lowers the learned rate, once per incident: the 429s of sends
-- already on their way within a second of the cut say nothing new. The
-- rate throttled becomes the search's high mark; the next rate is the
-- last good one below it, or 0.7 of it when none is known, never below
-- min_rps. A rate pinned by an operator ('P') stays.
if ARGV[3] == 'throttled' and ARGV[4] ~= '' then
  local a_target, a_min, a_step, a_probe = string.match(ARGV[4], '^(%S+) (%S+) (%S+) (%S+)$')
  a_target, a_min, a_step, a_probe = tonumber(a_target), tonumber(a_min), tonumber(a_step), tonumber(a_probe)
  local rate, lo, mode, cut = a_target, 0, 's', 0
  local st = redis.call('GET', KEYS[4])
  if st then
    local r, l, h, x, m, c = string.match(st, '^(%S+) (%S+) (%S+) (%S+) (%S+) (%S+) %S+$')
    r, l, h, x, c = tonumber(r), num(l), num(h), num(x), num(c)
    -- A state the admission script would ignore (a rate below min_rps, not a number,
    -- a field past 2^53) is ignored here too: the search starts again.
    if r and l and h and x and c and r >= min_rps and r < math.huge and string.match(m, '^[supP]$') then
      rate, lo, mode, cut = r, l, m, c
    end
  end
  local o = redis.call('GET', KEYS[5])
  if o then
    local og = tonumber(string.match(o, '^(%S*) '))
    if og and og >= min_rps and og < rate then
      rate = og
    end
  end
  rate = math.min(rate, a_target)
  if mode ~= 'P' and now >= cut + 1000000 then
    -- The next step counts from the penalty's end: the rate must hold
    -- where it is used.
    local hi, nx = rate, now + cur * 1000 + a_step
    if lo > 0 and lo < hi then
      rate = lo
      if mode ~= 's' then
        mode, nx = 'p', now + cur * 1000 + a_probe -- a failed probe: back to the settled rate
      end
    else
      lo, rate, mode = 0, math.max(a_min, hi * 0.7), 's'
    end
    redis.call('SET', KEYS[4], string.format('%.3f %.3f %.3f %d %s %d 0', rate, lo, hi, nx, mode, now))
  end
end
return {cur, why}
