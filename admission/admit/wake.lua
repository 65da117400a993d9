-- wake.lua: wake tickets spread the waiters of all processes over the
-- coming slots, each the cost of the one before it apart, instead of
-- waking them all when the next slot opens (where one wins and the rest
-- pay a call for nothing). Always in the script (a caller asks for
-- tickets per call, ARGV[8]).
--
-- KEYS[4] -> wake-ticket key of the caller's class ({sms:<account>}:wake:<class>),
--            '<next> <global>': the class's next ticket and its shadow of
--            the global TAT (below)
-- KEYS[12+R..] -> the wake-ticket keys of the later classes held to a
--            level the caller's class is held to (the global level, and
--            its reserves), one per interval of ARGV[25]; W of them
-- ARGV[10] -> the longest the caller will wait, in microseconds: a ticket
--            further away is not taken (it would be wasted)
-- ARGV[25] -> the push of each wake ticket of KEYS[12+R..], in
--            microseconds per unit, space-separated ('' for none): an
--            admission takes a slot of a reserve a later class shares,
--            which that class's next ticket would otherwise point at, so
--            its next ticket is pushed one slot later (0: the class shares
--            no reserve with the caller's). It takes a slot of the global
--            level too: each later class's shadow of the global TAT moves
--            by the send's units, as the TAT does
--
-- A ticket is a hint of when to ask, never a slot: the TATs alone decide,
-- and the lookahead lets a waiter that wakes a little early book its slot
-- rather than miss it. A class below the account's rate (marketing's
-- ceiling) shares the global level with the earlier classes, whose sends
-- take its slots there: its tickets, spaced by its own interval, would
-- run ahead of its slots and every waiter that came too early would ask
-- twice. So a wake-ticket key also keeps the class's shadow of the global
-- TAT: the real one, plus the units of the tickets handed out since, plus
-- what the earlier classes' admissions took meanwhile (they push it by
-- their sends' units). A ticket is the later of the class's next one and
-- when the shadow lets its first unit go (for a class held below the
-- account's rate only: one at the global level's interval follows it
-- already); a shadow behind the real TAT counts as it. A value of one
-- number (a version before the shadow) is the next ticket alone.
--
-- Sets ticket (prelude.lua's deny takes one) and pushes; writes the
-- tickets taken, the later classes' pushes, and sets nxt: when allowed
-- with ARGV[8] = '2', when to ask for the next message (may be <= 0: at
-- once).

-- @read
-- The cost of the caller queued behind this one ('2 <n>'), which the next
-- ticket is for: 1 when not given. (Matched into a local first: a Lua
-- whose failed match returns no value at all would leave tonumber none.)
local next_cost = string.match(tickets, '^2 (%d+)$')
next_cost = math.max(tonumber(next_cost or '1'), 1)
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
for v in string.gmatch(ARGV[25], '%d+') do
  pushes[#pushes + 1] = tonumber(v)
end
-- ticket returns when the caller should ask, in microseconds from now: the
-- next free hint at or after open (at most 1 s per unit past it: a stale
-- hint far ahead is not followed), and takes it for a send of units: the
-- next hint is that many slots later, when the slot after this send opens
-- if no earlier class takes a slot meanwhile.
-- The global level's shadow g (below) holds the ticket back too: the
-- first unit goes once g - tau allows it, and the send adds its units.
ticket = function(open, units)
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

-- @commit
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
local nxt = 0
if string.sub(tickets, 1, 1) == '2' then
  nxt = ticket(open, next_cost)
end
