#!lua
-- learned.lua reads, pins or resets the account's learned rate (an
-- operator's command; the search itself lives in the admission script and penalty.lua).
--
-- KEYS[1] -> learned rate ({sms:<account>}:learned), see the admission script
-- ARGV[1] -> 'get', 'reset' (back to the configured rates; the next 429
--            starts a new search), or 'pin' (hold ARGV[2] until reset)
-- ARGV[2] -> the rate to pin, in the account's unit per second
--
-- Returns the state after the call ('' when none) and Redis's time in
-- microseconds, {state, now_us}.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
if ARGV[1] == 'reset' then
  redis.call('DEL', KEYS[1])
elseif ARGV[1] == 'pin' then
  redis.call('SET', KEYS[1], string.format('%.3f 0 0 0 P %d 0', tonumber(ARGV[2]), now))
end
return {redis.call('GET', KEYS[1]) or '', string.format('%d', now)}
