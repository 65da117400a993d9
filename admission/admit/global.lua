-- global.lua: the account's level, which every send passes, and the
-- decision: the slot is the first instant at which every level the caller
-- passes has room, at the earliest now. Idle time banks no credit beyond
-- the tolerance (a TAT in the past counts as now). Always in the script.
--
-- Reads the global TAT (KEYS[1]) and the levels' waits the other parts
-- set (m_wait, r_wait, s_wait: -1 when absent). Returns, when the slot
-- opens past the lookahead, a denial by the level that binds: SENDER when
-- the pool's sender opens last, else CEILING, RESERVE or GLOBAL. Else
-- moves the TAT past the slot by the send's cost and writes every level
-- in one MSET, and returns the slot: allowed, the wait until it opens,
-- the next ticket and the sender taken.

-- @read
tat_g = math.max(num(s[1]) or 0, now)

-- @wait
local g_tau = g_tau0 - reserve
g_wait = tat_g - now - g_tau

-- @decide
local wait = math.max(g_wait, m_wait, r_wait, s_wait, 0)
if wait > lookahead then
  if s_wait > math.max(g_wait, m_wait, r_wait) then
    return deny(s_wait, R.SENDER)
  end
  if press then
    press()
  end
  if m_wait > g_wait and m_wait >= r_wait then
    return deny(m_wait, R.CEILING)
  end
  if r_wait > g_wait then
    return deny(r_wait, R.RESERVE)
  end
  return deny(g_wait, R.GLOBAL)
end
if math.max(g_wait, m_wait, r_wait) > 0 then
  if press then
    press() -- booked ahead: it could not go at once
  end
end
local at = now + wait

-- @commit
tat_g = math.max(tat_g, at) + cost * g_int
put(KEYS[1], tat_g)
open = tat_g - g_tau

-- @write
redis.call('MSET', unpack(out))

-- @reply
return reply(1, wait, R.ALLOWED, nxt, '', pick or '', at)
