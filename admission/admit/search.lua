-- search.lua: the learned rate's search upward, in the script of an
-- account that learns (Config.Adaptive) only.
--
-- Reads the search's settings (learned.lua's ARGV[19]) and the state
-- learned.lua read (lrn). The search moves up once its step is due, and
-- only if the account was pressed since the last step (a caller could not
-- go at once): a rate no traffic pressed against proves nothing. Mode 's'
-- searches (bisection between the last good rate, lo, and the last
-- throttled one, hi), 'u' tries one step above a settled rate, 'p' is
-- settled, 'P' pinned by an operator. Writes the state in the MSET (or
-- deletes it once proven at the target), sets learned, and sets press,
-- which records that a caller could not go at once (once a step: the flag
-- is written when it changes).

-- @check
-- learned_state writes the learned rate's state in the MSET.
local function learned_state(r, mode, nx, pressed)
  out[#out + 1] = KEYS[8]
  out[#out + 1] = string.format('%.3f %.3f %.3f %d %s %d %d', r, lrn.lo, lrn.hi, nx, mode, lrn.cut, pressed and 1 or 0)
end
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
press = function()
  if searching and not lrn.pressed then
    lrn.pressed = true
    learned_state(lrn.rate, lrn.mode, lrn.next, true)
  end
end
