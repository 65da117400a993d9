-- verify.lua: marks a sent OTP's code used (package guard).
--
-- KEYS[1] {sms:guard:<class>}:otp:<id>, the send's "range sent_ms" that
--         sent.lua wrote; KEYS[2] {sms:guard:<class>}:blocks, whose
--         prefix the verified:<range> key is built from.
-- ARGV[1] id, ARGV[2] min_conversion's per (ms), ARGV[3] now (ms)
--
-- Returns 1 when the id was a send of the class still in the window, 0
-- for an unknown or old id (counted by the caller and ignored): the key
-- lives per, and a send older than per is old whatever its key says. A
-- second verification of an id changes nothing.
local v = redis.call('GET', KEYS[1])
if not v then
  return 0
end
local range, at = string.match(v, '^(%S+) (%d+)$')
if not range or tonumber(at) <= tonumber(ARGV[3]) - tonumber(ARGV[2]) then
  return 0
end
local k = string.sub(KEYS[2], 1, -7) .. 'verified:' .. range
redis.call('ZADD', k, at, ARGV[1])
redis.call('PEXPIRE', k, ARGV[2])
return 1
