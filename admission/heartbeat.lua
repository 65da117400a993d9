#!lua
-- heartbeat.lua records that a process is alive and what state it is in,
-- for `dispatcher status`, and tells it the account's health; at most once
-- a second per process and account.
--
-- KEYS[1] -> the processes' last beats ({sms:<account>}:processes), a
--            sorted set of process ids scored by their last beat (µs,
--            Redis TIME)
-- KEYS[2] -> the processes' states ({sms:<account>}:process-states), a
--            hash of process id to state
-- KEYS[3] -> the account's health ({sms:<account>}:health), read only:
--            finish.lua writes it, gcra.lua's header gives its format
-- ARGV[1] -> the process id
-- ARGV[2] -> its state ('<mode> <host> <version>'; mode ok, fallback,
--            penalty or paused)
-- ARGV[3] -> how long a silent process stays listed, in milliseconds (a
--            process cut off from Redis stops beating: listed silent, then
--            gone)
--
-- Returns {listed, health}: the processes listed after the call, and the
-- account's health as gcra.lua reports it (0 healthy: no key, or one of
-- another shape; 1 mode 'h', a run of failures counted; 2 mode 'd',
-- degraded), so that a process that sends nothing on the account still
-- learns its health within a beat.

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
local health = 0
local mode = string.match(redis.call('GET', KEYS[3]) or '', '^([hd]) %d+ %d+ %d+ %d+ %d+ %d+$')
if mode == 'd' then
  health = 2
elseif mode == 'h' then
  health = 1
end
return {redis.call('ZCARD', KEYS[1]), health}
