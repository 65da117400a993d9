#!lua
-- heartbeat.lua records that a process is alive and what state it is in on
-- each of its accounts, for `dispatcher status`: one call a second per
-- process, whatever its number of accounts. The registry has a hash slot
-- of its own, so that the call touches one slot on a Redis Cluster.
--
-- KEYS[1] -> the processes' last beats ({sms:processes}), a sorted set of
--            process ids scored by their last beat (µs, Redis TIME)
-- KEYS[2] -> the processes' states ({sms:processes}:states), a hash of
--            process id to state
-- ARGV[1] -> the process id
-- ARGV[2] -> its state, opaque here ('<host> <version> <account>=<mode>
--            ... <account>/<class>=<denied> ...'; mode ok, fallback,
--            penalty or paused, and the deliveries it denied since it
--            started: see status/)
-- ARGV[3] -> how long a silent process stays listed, in milliseconds (a
--            process cut off from Redis stops beating: listed silent, then
--            gone)
--
-- Returns the number of processes listed after the call. An account's
-- health is not read here (its key is in another slot): a process learns
-- it from its admissions' and settles' replies, and health.lua reads an
-- idle account's.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local keep = math.max(tonumber(ARGV[3]), 1)
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
local gone = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now - keep * 1000)
if #gone > 0 then
  redis.call('ZREM', KEYS[1], unpack(gone))
  redis.call('HDEL', KEYS[2], unpack(gone))
end
redis.call('PEXPIRE', KEYS[1], keep)
redis.call('PEXPIRE', KEYS[2], keep)
return redis.call('ZCARD', KEYS[1])
