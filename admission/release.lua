-- release.lua gives send claims back when their messages will be retried,
-- so that the next delivery need not wait for a claim to expire. Several
-- at once after an outage: every key shares the account's hash tag.
--
-- KEYS[i] -> id record key ({sms:<account>}:id:<id>)
-- ARGV[i] -> claim token of the caller for KEYS[i]
--
-- Returns how many claims were removed; a record that is not the caller's
-- claim (expired and taken by another attempt, or final) is left alone.
local n = 0
for i, key in ipairs(KEYS) do
  if redis.call('GET', key) == 'claim:' .. ARGV[i] then
    n = n + redis.call('DEL', key)
  end
end
return n
