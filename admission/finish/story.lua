-- story.lua: a sent message's story, kept at its first part's provider
-- id for its receipts (receipt.lua's header gives its fields), with the
-- ways to it and its resend payload. It lives as the record (life).
--
-- KEYS[5] -> the id's key ({sms:<account>}:msg:<id>), set to
--            '1\t<first provider id>' when ARGV[14] is '1': the way to the
--            story of a send whose record here does not name it (any key
--            of the account otherwise)
-- KEYS[6] -> the message's resend payload ({sms:<account>}:resend:<id>),
--            written when ARGV[10] is not '' (any key of the account
--            otherwise)
-- KEYS[7..] -> the provider's ids of the message's parts, in order
--            ({sms:<account>}:pid:<provider id>): the first part's is set
--            to the story (a JSON object: receipt.lua's header gives its
--            fields), each later one to '<part>\t<first provider id>';
--            none: no story
-- The story's arguments, read only with KEYS[7..]:
-- ARGV[7] -> the message's id
-- ARGV[8] -> its class's name
-- ARGV[9] -> the sender it went from ('' the adapter's)
-- ARGV[10] -> the resend payload ('' none)
-- ARGV[11] -> the resend payload's lifetime in milliseconds (below 1: not
--            kept); the story and the parts' keys live as the record
--            (ARGV[2])
-- ARGV[12] -> the destination's prefix and number hash ('+62 1a2b3c') of
--            a first-class message, which receipt.lua counts its finals
--            by ('' none), kept as the story's prefix
-- ARGV[13] -> when the send's slot opened, ms on Redis's clock (the admission script's
--            slot_us): the story's 'sent'; below 1, this call's TIME
-- ARGV[14] -> '1' to set KEYS[5]: the record this call writes (KEYS[1]) is
--            not the id's or names none of the parts (an overflow
--            account's send, a resend's record, a provider id apart)

-- @read
local story = #KEYS > 6
local resend_life
if story then
  resend_life = math.min(tonumber(ARGV[11]) or 0, 2 ^ 40)
  if (ARGV[7] or '') == '' then
    return redis.error_reply('finish.lua: a story without the message id')
  end
end

-- @write
if story then
  -- The newest send's story replaces an older one's: its parts start
  -- with no status.
  -- Dated by the admission's clock, Redis's: a TIME saved a send.
  local sent = math.min(tonumber(ARGV[13]) or 0, 2 ^ 53 - 1)
  if not (sent >= 1) then
    local t = redis.call('TIME')
    sent = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  local h = {id = ARGV[7], class = ARGV[8], sender = ARGV[9], n = string.format('%d', #KEYS - 6), sent = string.format('%d', sent)}
  if (ARGV[12] or '') ~= '' then
    h.prefix = ARGV[12]
  end
  local pre = string.sub(KEYS[2], 1, -7) -- '{sms:<account>}:' of '{sms:<account>}:leases'
  for i = 7, #KEYS do
    h['p' .. (i - 6)] = string.sub(KEYS[i], #pre + 5)
  end
  -- One string, whole, with its lifetime, at the first part's key: a
  -- receipt of a one-part message reads it with one GET. It replaces an
  -- older send's story of either form.
  local first = '\t' .. h.p1
  redis.call('SET', KEYS[7], cjson.encode(h), 'PX', life)
  for i = 8, #KEYS do
    if KEYS[i] ~= KEYS[7] then -- a part named as the first keeps the story
      redis.call('SET', KEYS[i], (i - 6) .. first, 'PX', life)
    end
  end
  if ARGV[14] == '1' then
    redis.call('SET', KEYS[5], '1' .. first, 'PX', life)
  end
  if ARGV[10] ~= '' and resend_life >= 1 then
    redis.call('SET', KEYS[6], ARGV[10], 'PX', resend_life)
  end
end
