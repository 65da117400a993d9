-- stats: a class's deferred count, those overdue, and the next releases;
-- read only. KEYS[1] due. ARGV[1] overdue before (ms), ARGV[2] next count.
-- Returns {total, overdue, id, due, ...}.
local out = {redis.call('ZCARD', KEYS[1]), redis.call('ZCOUNT', KEYS[1], '-inf', '(' .. ARGV[1])}
-- No next count reads none: ZRANGE 0 -1 would read the whole set.
if tonumber(ARGV[2]) > 0 then
  local next = redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[2]) - 1, 'WITHSCORES')
  for i = 1, #next do
    out[#out + 1] = next[i]
  end
end
return out
