-- ended: end the traces of ids the store no longer holds.
-- KEYS[1..] the ids' traces (hashes), one slot.
-- ARGV[1] how they ended (released, expired or dropped), ARGV[2] when
-- (ms), ARGV[3] how long each trace is kept from now (ms).
-- A trace that expired meanwhile is begun again with its end alone.
-- Returns the number of traces written.
for _, k in ipairs(KEYS) do
  redis.call('HSET', k, 'ended', ARGV[1], 'ended_at', ARGV[2])
  redis.call('PEXPIRE', k, ARGV[3])
end
return #KEYS
