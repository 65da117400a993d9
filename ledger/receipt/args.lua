-- args.lua: the receipt's arguments read and checked, the fold's tables of
-- statuses, Redis's clock, and the helpers every part reads numbers and
-- keys with: num, and pre (the account's '{sms:<account>}:', from the
-- owed set's key, KEYS[2]).
--
-- ARGV[1] -> the receipt's status, one of the 11 names or 'suppressed'
--            (a refusal for the recipient's opt-out) ('': a sweep)
-- ARGV[2] -> its error code ('' none)
-- ARGV[3] -> when the status happened, ms since the epoch (below 1:
--            Redis's clock)
-- ARGV[4] -> the owed set's lifetime in milliseconds (clamped to
--            [1, 2^40])
-- ARGV[5] -> the delivery latency buckets' upper bounds in milliseconds,
--            ascending, space-separated; one more bucket counts the rest

-- @check
local FINAL = {delivered = true, undelivered = true, failed = true, expired = true, rejected = true, suppressed = true}
local RANK = {unknown = 1, queued = 2, accepted = 3, sending = 4, sent = 5, buffered = 6}
local NAMES = {'unknown', 'queued', 'accepted', 'sending', 'sent', 'buffered'}
local MAX_PARTS = 64

local status, code = ARGV[1], ARGV[2] or ''
if status ~= '' and not FINAL[status] and not RANK[status] then
  return redis.error_reply('receipt.lua: unknown status')
end
local at, life, age, most = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[6]), tonumber(ARGV[7])
if not (at and life and age and most) or #ARGV < 10 or (#ARGV - 10) % 2 ~= 0 then
  return redis.error_reply('receipt.lua: arguments not of the header\'s form')
end
-- PEXPIRE refuses a lifetime <= 0 and one past the clock's range.
life = math.min(math.max(life, 1), 2 ^ 40)
most = math.min(math.max(most, 0), 1000)
local bounds = {}
for b in string.gmatch(ARGV[5] or '', '%d+') do
  bounds[#bounds + 1] = tonumber(b)
end
local pre = string.sub(KEYS[2], 1, -5) -- '{sms:<account>}:'

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

-- A number read back, within [0, 2^53); 0 when it is none (NaN and inf
-- are none, as in the admission script's num).
local function num(x)
  x = tonumber(x)
  if not (x and x > -math.huge and x < math.huge) then
    return 0
  end
  return math.min(math.max(x, 0), 2 ^ 53 - 1)
end
