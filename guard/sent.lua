-- sent.lua: counts sends of one class in its guard's ranges and blocks a
-- range that passes a rule (package guard).
--
-- KEYS[1] {sms:guard:<class>}:blocks, the class's blocks: a hash of
--         range -> "reason until_ms sends verified", and the channel a
--         new block is published on. The other keys are built from its
--         prefix (internal/keys, Guard): rate:<range>, conv:<range>,
--         verified:<range>, otp:<id>.
-- ARGV[1] now (ms)
-- ARGV[2..4] max_per_prefix: count, per (ms), block_for (ms)
-- ARGV[5..9] min_conversion: ratio, min_sends, per (ms), grace (ms),
--         block_for (ms)
-- ARGV[10..] a send each three: its id, its member in the rate window
--         (unique per send), its range of max_per_prefix ("" none), its
--         range of min_conversion ("" none).
--
-- Returns the blocks set, four values each: range, reason, sends,
-- verified. Invariant: a range holds one block at a time; a block that
-- has not ended is never replaced here (an operator's neither).
local blocks = KEYS[1]
local base = string.sub(blocks, 1, -7) -- "{sms:guard:<class>}:"
local now = tonumber(ARGV[1])
local pcount, pper, pblock = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local ratio, cmin, cper, grace, cblock =
  tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])

local out = {}
local function block(range, reason, ends, sends, verified)
  local cur = redis.call('HGET', blocks, range)
  if cur then
    local u = tonumber(string.match(cur, '^%S+ (%d+)'))
    if u and u > now then
      return
    end
  end
  redis.call('HSET', blocks, range, reason .. ' ' .. ends .. ' ' .. sends .. ' ' .. verified)
  out[#out + 1] = range
  out[#out + 1] = reason
  out[#out + 1] = sends
  out[#out + 1] = verified
end

for i = 10, #ARGV, 4 do
  local id, member, rate, conv = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  if rate ~= '' then
    local k = base .. 'rate:' .. rate
    redis.call('ZADD', k, now, member)
    redis.call('ZREMRANGEBYSCORE', k, '-inf', now - pper)
    redis.call('PEXPIRE', k, pper)
    local n = redis.call('ZCARD', k)
    if n >= pcount then
      block(rate, 'prefix_rate', now + pblock, n, 0)
    end
  end
  if conv ~= '' then
    local s, v = base .. 'conv:' .. conv, base .. 'verified:' .. conv
    redis.call('ZADD', s, now, id)
    redis.call('ZREMRANGEBYSCORE', s, '-inf', now - cper)
    redis.call('ZREMRANGEBYSCORE', v, '-inf', now - cper)
    redis.call('PEXPIRE', s, cper)
    redis.call('SET', base .. 'otp:' .. id, conv .. ' ' .. now, 'PX', cper)
    -- Only sends older than the grace are judged: their codes had the
    -- time to be typed.
    local sends = redis.call('ZCOUNT', s, '(' .. (now - cper), now - grace)
    if sends >= cmin then
      local verified = redis.call('ZCOUNT', v, '(' .. (now - cper), now - grace)
      if verified < ratio * sends then
        block(conv, 'conversion', now + cblock, sends, verified)
      end
    end
  end
end

-- Ended blocks are dropped here: a reader ignores them meanwhile.
local all = redis.call('HGETALL', blocks)
for j = 1, #all, 2 do
  local u = tonumber(string.match(all[j + 1], '^%S+ (%d+)'))
  if not u or u <= now then
    redis.call('HDEL', blocks, all[j])
  end
end
if #out > 0 then
  redis.call('PUBLISH', blocks, 'block')
end
return out
