-- sent.lua: the units the provider accepted, counted for `dispatcher
-- status`.
--
-- KEYS[3] -> the sends counter of the send's class and second
--            ({sms:<account>}:sent:<class>:<unix second>), counted when
--            ARGV[4] is above 0 (any key of the account otherwise)
-- ARGV[4] -> units the provider accepted, to count (0: none): what
--            `dispatcher status` reads; the counter lives 70 s

-- @write
local units = tonumber(ARGV[4]) or 0
if units > 0 and redis.call('INCRBY', KEYS[3], units) == units then
  redis.call('PEXPIRE', KEYS[3], 70000)
end
