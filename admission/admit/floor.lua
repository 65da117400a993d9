-- floor.lua: the recovery floor. A caller just back from its Redis-down
-- fallback knows other processes may still be sending from theirs, so
-- every level's TAT is first raised to at least now + floor (never
-- lowered), before anything is decided, and kept whatever is. Always in
-- the script.
--
-- ARGV[6] -> recovery floor in microseconds, 0 normally: the caller has just
--            come back from its Redis-down fallback, and other processes may
--            still be sending from theirs for up to this long, so both TATs
--            are first raised to at least now + floor (never lowered)
--            (and so are the ceiling's, the reserves' and the senders')
--
-- Reads the levels the other parts read (tat_g, tat_m, res, the pool's
-- floor) and writes each one it raises.

-- @read
local floor = tonumber(ARGV[6])
if floor > 0 then
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
