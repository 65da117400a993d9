-- num returns v read as a count or an instant, nil unless it is a number
-- in [0, 2^53) (NaN and inf are not: a hand-typed 'nan' TAT would admit
-- once and then be written as 2^53). Every number a script reads from
-- Redis as a count or an instant goes through it. A shared part
-- (internal/luapart): the composer puts it at the top of each script
-- that marks the place with a "--@num" line.
local function num(v)
  v = tonumber(v)
  if v and v >= 0 and v <= 2 ^ 53 - 1 then
    return v
  end
  return nil
end
