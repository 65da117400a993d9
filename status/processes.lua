#!lua flags=no-writes
-- processes.lua reads the process registry heartbeat.lua keeps, for
-- `dispatcher status`: one call for every account. Run with EVALSHA_RO.
--
-- KEYS[1] -> the processes' last beats ({sms:processes})
-- KEYS[2] -> the processes' states ({sms:processes}:states)
--
-- Returns {now_us, {id, last_beat_us, state, ...}}: a process without a
-- state has ''.

local t = redis.call('TIME')
local procs = {}
local beats = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
for i = 1, #beats, 2 do
  procs[#procs + 1] = beats[i]
  procs[#procs + 1] = beats[i + 1]
  procs[#procs + 1] = redis.call('HGET', KEYS[2], beats[i]) or ''
end
return {string.format('%d', tonumber(t[1]) * 1000000 + tonumber(t[2])), procs}
