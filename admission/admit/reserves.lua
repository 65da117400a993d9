-- reserves.lua: the earlier classes' reserves the caller's class is held
-- to, each a level the classes after an earlier class share. In the
-- script of a class held to one only.
--
-- KEYS[12..] -> the TAT keys of the earlier classes' reserves the caller's
--            class is held to ({sms:<account>}:tat:after:<class>: what the
--            classes after <class> take together), one per triple of
--            ARGV[24]; R of them
-- ARGV[24] -> the reserves the caller's class is held to, one
--            '<interval> <tau> <reserve>' triple per reserve key of
--            KEYS[12..] (space-separated, '' for none), in microseconds:
--            the rate the classes after an earlier class may take
--            together, and the part of its tolerance the caller may not
--            use (none for the first class after that class, one interval
--            more for each class after it), so that of two classes held
--            to the same reserve the earlier is never kept waiting by the
--            later
--
-- Sets res (one level per reserve, scaled by prelude.lua's scale) and
-- r_wait; writes each reserve's TAT past the slot.

-- @read
for iv, tau, r in string.gmatch(ARGV[24], '(%d+) (%d+) (%d+)') do
  local k = KV + #res
  res[#res + 1] = {int = tonumber(iv), tau = tonumber(tau), reserve = tonumber(r), key = k,
    tat = math.max(num(s[k]) or 0, now)}
end

-- @scale
for _, v in ipairs(res) do
  spacing = math.max(spacing, v.int)
end

-- @wait
for _, v in ipairs(res) do
  r_wait = math.max(r_wait, v.tat - now - (v.tau - v.reserve))
end

-- @commit
for _, v in ipairs(res) do
  v.tat = math.max(v.tat, at) + cost * v.int
  put(KEYS[v.key], v.tat)
  open = math.max(open, v.tat - (v.tau - v.reserve))
end
