#!lua flags=no-writes
-- status.lua reads an account's state for `dispatcher status`, in one call
-- that writes nothing (run with EVALSHA_RO: Redis refuses a write).
--
-- KEYS[1] -> rate override ({sms:<account>}:rate-override)
-- KEYS[2] -> learned rate ({sms:<account>}:learned)
-- KEYS[3] -> penalty key ({sms:<account>}:penalty)
-- KEYS[4] -> in-flight leases ({sms:<account>}:leases)
-- KEYS[5] -> the processes' last beats ({sms:<account>}:processes, as
--            an older process beats: a process of this version beats in
--            the registry, processes.lua)
-- KEYS[6] -> the processes' states ({sms:<account>}:process-states)
-- KEYS[7] -> the account's health ({sms:<account>}:health; the admission script's
--            header gives its format)
-- KEYS[8..] -> the sends counters to read ({sms:<account>}:sent:<class>:<second>)
--
-- Returns {now_us, override, override_pttl_ms, learned, penalty,
-- penalty_pttl_ms, leases_live, {id, last_beat_us, state, ...},
-- {counter values ...}, health}: a missing string is '', a missing count 0.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local procs = {}
local beats = redis.call('ZRANGE', KEYS[5], 0, -1, 'WITHSCORES')
for i = 1, #beats, 2 do
  procs[#procs + 1] = beats[i]
  procs[#procs + 1] = beats[i + 1]
  procs[#procs + 1] = redis.call('HGET', KEYS[6], beats[i]) or ''
end
--@num
local sent = {}
if #KEYS > 7 then
  local v = redis.call('MGET', unpack(KEYS, 8))
  for i = 1, #v do
    sent[i] = num(v[i]) or 0
  end
end
return {
  string.format('%d', now),
  redis.call('GET', KEYS[1]) or '', redis.call('PTTL', KEYS[1]),
  redis.call('GET', KEYS[2]) or '',
  redis.call('GET', KEYS[3]) or '', redis.call('PTTL', KEYS[3]),
  redis.call('ZCOUNT', KEYS[4], now, '+inf'),
  procs, sent,
  redis.call('GET', KEYS[7]) or '',
}
