-- pushes.lua: an admission takes slots the later classes' wake tickets
-- would point at; their tickets and shadows move past them. In the script
-- of a class with later classes only.
--
-- KEYS[12+R..] -> the wake-ticket keys of the later classes held to a
--            level the caller's class is held to (the global level, and
--            its reserves), one per interval of ARGV[25]; W of them
-- ARGV[25] -> the push of each wake ticket of KEYS[12+R..], in
--            microseconds per unit, space-separated ('' for none): an
--            admission takes a slot of a reserve a later class shares,
--            which that class's next ticket would otherwise point at, so
--            its next ticket is pushed one slot later (0: the class shares
--            no reserve with the caller's). It takes a slot of the global
--            level too: each later class's shadow of the global TAT moves
--            by the send's units, as the TAT does
--
-- Sets pushes (scaled by prelude.lua's scale as the rates are lowered);
-- writes, once allowed, each later class's ticket key that lies ahead.

-- @read
for v in string.gmatch(ARGV[25], '%d+') do
  pushes[#pushes + 1] = tonumber(v)
end

-- @commit
for i, p in ipairs(pushes) do
  local k = KV - 1 + #res + i
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
