#!lua
-- pool.lua builds the indexes of an account's sender pool that the admission script
-- found missing (its reason POOL_MISSING): one sorted set per sender interval, each
-- sender scored by its TAT, so that the admission script finds the sender whose slot
-- opens first in O(log N) whatever the pool's size. An index that exists
-- is left as it is: another process built it. Each index is built whole
-- in this one call, so that the admission script never sees part of one.
--
-- KEYS[1..] -> the pool's indexes ({sms:<account>}:pool:<hash>:<interval>),
--            as the admission script's KEYS[12+R+W..] after the floor
-- ARGV[1] -> the prefix of the senders' TAT keys ({sms:<account>}:tat:sender:)
-- ARGV[2] -> the indexes' lifetime in milliseconds: an index of a pool no
--            longer configured goes away, and one in use is built again
--            when it has
-- ARGV[3] -> how many senders each index holds, space-separated
-- ARGV[4..] -> the senders' From, index after index
--
-- Returns how many indexes were built.

local prefix, ttl = ARGV[1], math.max(tonumber(ARGV[2]), 1)
local counts = {}
for n in string.gmatch(ARGV[3], '%d+') do
  counts[#counts + 1] = tonumber(n)
end
local first, built = 4, 0
for k = 1, #KEYS do
  local n = counts[k]
  if redis.call('EXISTS', KEYS[k]) == 0 then
    -- In chunks: Lua's unpack stops near 8,000 values.
    for lo = first, first + n - 1, 500 do
      local hi = math.min(lo + 499, first + n - 1)
      local names = {}
      for i = lo, hi do
        names[#names + 1] = prefix .. ARGV[i]
      end
      local tats = redis.call('MGET', unpack(names))
      local args = {}
      for i = lo, hi do
        local v = tonumber(tats[i - lo + 1])
        if not (v and v >= 0 and v < 2 ^ 53) then
          v = 0
        end
        args[#args + 1] = string.format('%d', v)
        args[#args + 1] = ARGV[i]
      end
      redis.call('ZADD', KEYS[k], unpack(args))
    end
    redis.call('PEXPIRE', KEYS[k], ttl)
    built = built + 1
  end
  first = first + n
end
return built
