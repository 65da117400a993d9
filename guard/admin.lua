-- admin.lua: an operator's block or unblock of a range (package guard).
--
-- KEYS[1] {sms:guard:<class>}:blocks
-- ARGV[1] range (digits after the +), ARGV[2] "block" or "unblock",
-- ARGV[3] the block's value ("operator until_ms 0 0") for a block.
--
-- An unblock also forgets the range's counts, so that the next send does
-- not block it again at once; either is published on the blocks'
-- channel. Returns 1 when the hash changed.
local base = string.sub(KEYS[1], 1, -7)
local n
if ARGV[2] == 'block' then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
  n = 1
else
  n = redis.call('HDEL', KEYS[1], ARGV[1])
  redis.call('DEL', base .. 'rate:' .. ARGV[1], base .. 'conv:' .. ARGV[1], base .. 'verified:' .. ARGV[1])
end
redis.call('PUBLISH', KEYS[1], ARGV[2])
return n
