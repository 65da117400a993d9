-- learned.lua: the learned rate, in force while the account learns (or an
-- operator pinned it, mode 'P'); it can only lower the rates, like the
-- override. Always in the script (an operator may pin a rate at any
-- time); search.lua moves it.
--
-- KEYS[8] -> learned rate ({sms:<account>}:learned, '<rate> <low> <high>
--            <next_us> <mode> <cut_us> <pressed>'), written by penalty.lua
--            on a 429 and here as the search moves up (ARGV[19]); in force
--            while the account learns (or an operator pinned it, mode
--            'P'), and it can only lower the rates, like the override. A
--            state whose rate is not a number of at least min_rps, or
--            whose other numbers are not in [0, 2^53), is ignored and
--            reported (ignored)
-- ARGV[19] -> the learned rate's search, '' when the account does not
--            learn: '<target_rps> <min_rps> <step_us> <probe_us>'. Once
--            the learned rate's next step is due and the account was
--            pressed since the last step (a caller could not go at once),
--            the search moves up: bisection between
--            the last good and the last throttled rate while searching,
--            one small step every probe_us once settled; never above
--            target_rps
--
-- Sets lrn (the state read, nil when none is in force or it is ignored),
-- learned (the rate in force in thousandths, 0: none) and ignored (2).
-- Lowers the account's rate as the override does, and the ceiling and
-- reserves in proportion, so that every class keeps its share. Writes
-- nothing.

-- @read
local adaptive = ARGV[19]
local lrn = nil
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

-- @scale
if lrn then
  local iv = math.ceil(1000000 / lrn.rate)
  if iv > g_int then
    local f = iv / g_int
    g_int = iv
    m_int, m_tau = math.ceil(m_int * f), math.ceil(m_tau * f)
    scale(f)
  end
end
