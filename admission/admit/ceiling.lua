-- ceiling.lua: the caller's class's ceiling, a level of its own below the
-- account's rate (marketing's MarketingRPS). In the script of a class
-- with a ceiling only.
--
-- KEYS[2] -> the caller's class's ceiling TAT key ({sms:<account>}:tat:<class>),
--            microseconds; read only when ARGV[3] is not 0
-- ARGV[3] -> the caller's class's ceiling emission interval in microseconds
--            (0: the class has no ceiling below the account's rate)
-- ARGV[4] -> the ceiling's tolerance tau in microseconds
--
-- Sets capped, the ceiling's TAT and rate (which override.lua and
-- learned.lua lengthen) and m_wait; writes its TAT past the slot.

-- @read
capped = ARGV[3] ~= '0'
m_int, m_tau = tonumber(ARGV[3]), tonumber(ARGV[4])
tat_m = math.max(num(s[2]) or 0, now)

-- @scale
if capped then
  spacing = math.max(spacing, m_int)
end

-- @wait
if capped then
  m_wait = tat_m - now - m_tau
end

-- @commit
if capped then
  tat_m = math.max(tat_m, at) + cost * m_int
  put(KEYS[2], tat_m)
  open = math.max(open, tat_m - m_tau)
end
