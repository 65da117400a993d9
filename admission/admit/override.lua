-- override.lua: an operator's override lowers the rates without a
-- redeploy. Always in the script (an operator may set it at any time).
--
-- KEYS[5] -> rate override ({sms:<account>}:rate-override, '<target_rps>
--            <marketing_rps>'), set by an operator to lower the rates
--            without a redeploy; a value can only lower a rate, never raise
--            it. A rate of 0 is not overridden; one that is not a number of
--            at least min_rps (below) is ignored and reported (ignored)
-- ARGV[5] -> '1' when the override's second rate lowers the caller's
--            ceiling (the last class's), '0' otherwise
--
-- Lengthens the global interval, and scales what shares it in proportion
-- (prelude.lua's scale: the tolerances keep the same BURST, the earlier
-- classes their share); the second rate lengthens the caller's ceiling.
-- Adds 1 to ignored for a value it ignores. Writes nothing.

-- @scale
if s[5] then
  local a, b = string.match(s[5], '^(%S*) (%S*)$')
  local o_g, o_m = tonumber(a), tonumber(b)
  if not a or (o_g ~= 0 and not rate(o_g)) or (o_m ~= 0 and not rate(o_m)) then
    ignored = ignored + 1
  end
  o_g, o_m = rate(o_g), rate(o_m) -- 0, or one ignored: that rate is not overridden
  if o_g and o_g > 0 and math.ceil(1000000 / o_g) > g_int then
    local f = math.ceil(1000000 / o_g) / g_int
    g_int = math.ceil(g_int * f)
    scale(f)
  end
  if ARGV[5] == '1' and o_m and o_m > 0 and math.ceil(1000000 / o_m) > m_int then
    local f = math.ceil(1000000 / o_m) / m_int
    m_int, m_tau = math.ceil(m_int * f), math.ceil(m_tau * f)
  end
end
