#!lua
-- override.lua sets or clears an operator's rate override for the account:
-- The admission script reads it on every call and applies each value only where it is
-- lower than the configured rate.
--
-- KEYS[1] -> override ({sms:<account>}:rate-override): '<target_rps> <marketing_rps>';
--            a rate that is not a number of at least min_rps (0.01,
--            admission.MinRPS) is not in force, here as in the admission script
-- KEYS[2] -> global TAT key ({sms:<account>}:tat:global)
-- KEYS[3] -> marketing TAT key ({sms:<account>}:tat:marketing)
-- KEYS[4] -> OTP wake-ticket key ({sms:<account>}:wake:otp)
-- KEYS[5] -> marketing wake-ticket key ({sms:<account>}:wake:marketing)
-- KEYS[6..] -> the other classes' wake-ticket keys ({sms:<account>}:wake:<class>),
--            when there are more than two
-- ARGV[1] -> target_rps (0: none; the caller checked it is at least min_rps)
-- ARGV[2] -> marketing_rps (0: none; likewise)
-- ARGV[3] -> lifetime in milliseconds (<= 0: until cleared, else at least 1)
-- ARGV[4] -> configured global emission interval in microseconds
-- ARGV[5] -> configured marketing emission interval in microseconds
-- ARGV[6] -> configured global tolerance tau in microseconds
-- ARGV[7] -> configured marketing tolerance tau in microseconds
--
-- Returns 1 when an override was set, 0 when it was cleared.
--
-- A TAT ahead of now is partly a debt in units of the interval it was
-- written with (at most tau plus one interval: at 1/s a burst leaves it
-- seconds ahead) and, beyond that, a pause in time (a 429's Retry-After, a
-- recovery floor). When the interval in force changes, the debt is rescaled
-- to the new interval (the same number of messages owed) and the pause is
-- kept as it is, so that clearing an override brings the configured rate
-- back at once, setting one keeps what was just sent counted, and neither
-- stretches nor shortens a penalty. Wake tickets, spaced at the old
-- interval, are dropped. A TAT is read as none unless it is a number in
-- [0, 2^53), and a rescaled one is written below 2^53: a Lua number past
-- it is no longer a whole number, and one past 2^63 is no integer at all.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local min_rps, max_us = 0.01, 2 ^ 53 - 1

-- interval is the one the admission script uses for configured interval int under an
-- override of rps (not a number of at least min_rps: none; never shorter
-- than int).
local function interval(int, rps)
  rps = tonumber(rps)
  if rps and rps >= min_rps and rps < math.huge and math.ceil(1000000 / rps) > int then
    return math.ceil(1000000 / rps)
  end
  return int
end

local old = {string.match(redis.call('GET', KEYS[1]) or '', '^(%S*) (%S*)$')}
for i = 1, 2 do
  local int = tonumber(ARGV[3 + i])
  local from, to = interval(int, old[i]), interval(int, ARGV[i])
  local tat = tonumber(redis.call('GET', KEYS[1 + i]))
  if not (tat and tat >= 0 and tat <= max_us) then
    tat = 0
  end
  if from ~= to and tat > now then
    local lead = tat - now
    local debt = math.min(lead, math.ceil(tonumber(ARGV[5 + i]) * from / int) + from)
    local rescaled = math.min(now + math.ceil(debt * to / from) + (lead - debt), max_us)
    redis.call('SET', KEYS[1 + i], string.format('%d', rescaled),
      'PX', math.max(math.ceil((rescaled - now) / 1000), 0) + 1000)
  end
end
redis.call('DEL', KEYS[1], unpack(KEYS, 4)) -- the override and every wake ticket

if tonumber(ARGV[1]) <= 0 and tonumber(ARGV[2]) <= 0 then
  return 0
end
if tonumber(ARGV[3]) > 0 then
  redis.call('SET', KEYS[1], ARGV[1] .. ' ' .. ARGV[2], 'PX', math.max(tonumber(ARGV[3]), 1))
else
  redis.call('SET', KEYS[1], ARGV[1] .. ' ' .. ARGV[2])
end
return 1
