#!lua flags=allow-oom
-- release.lua gives send claims back when their messages will be retried,
-- so that the next delivery need not wait for a claim to expire. Several
-- at once after an outage: every key shares the account's hash tag.
--
-- KEYS[i] -> id record key ({sms:<account>}:id:<id>)
-- ARGV[i] -> claim token of the caller for KEYS[i]
--
-- Returns how many claims were removed; a record that is not the caller's
-- claim (expired and taken by another attempt, or final) is left alone. A
-- counted claim ('<attempts>#claim:<token>') leaves its count behind, for
-- as long as the claim had left to live.
local n = 0
for i, key in ipairs(KEYS) do
  local v = redis.call('GET', key)
  local count, state = string.match(v or '', '^(%d+)#(.*)$')
  if not count then
    state = v
  end
  if state == 'claim:' .. ARGV[i] then
    if count then
      redis.call('SET', key, count .. '#', 'KEEPTTL')
    else
      redis.call('DEL', key)
    end
    n = n + 1
  end
end
return n
