-- wake.lua: wake tickets spread the waiters of all processes over the
-- coming slots, each the cost of the one before it apart, instead of
-- waking them all when the next slot opens (where one wins and the rest
-- pay a call for nothing). In the script of a call that asks for tickets
-- (ARGV[8] not '0').
--
-- KEYS[4] -> wake-ticket key of the caller's class ({sms:<account>}:wake:<class>),
--            '<next> <global>': the class's next ticket and its shadow of
--            the global TAT (below)
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
-- Sets ticket (prelude.lua's deny takes one) and nxt: when allowed with
-- ARGV[8] = '2', when to ask for the next message (may be <= 0: at once);
-- writes the tickets taken. pushes.lua moves the later classes' tickets.

-- @read
local tickets = ARGV[8]
-- The cost of the caller queued behind this one ('2 <n>'), which the next
-- ticket is for: 1 when not given. (Matched into a local first: a Lua
-- whose failed match returns no value at all would leave tonumber none.)
local next_cost = string.match(tickets, '^2 (%d+)$')
next_cost = math.max(tonumber(next_cost or '1'), 1)
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

-- @scale
-- Tickets are spaced by the class's longest interval in force: the
-- levels' (ceiling.lua and reserves.lua keep spacing the longest of
-- theirs), the global one's and the configured one's.
spacing = math.max(spacing, tonumber(ARGV[9]), g_int)

-- @commit
if string.sub(tickets, 1, 1) == '2' then
  nxt = ticket(open, next_cost)
end
