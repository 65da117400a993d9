-- record.lua: the id's send-once claim, taken in the same call as the
-- slot. Always in the script (a call without a token takes no claim).
--
-- KEYS[9] -> the id's record ({sms:<account>}:id:<id>), read when
--            ARGV[16] is not empty: the send-once claim is taken in the
--            same call
-- ARGV[16] -> claim token, unique per delivery attempt ('' takes no claim)
-- ARGV[17] -> claim lifetime in milliseconds, counted from the slot
-- ARGV[18] -> '1' to count this send in the id's record (the attempts
--            before it come back in the reply), '0' not to
--
-- Sets attempts (the reply's). Returns
-- RECORD, its detail 'held' or the record ('sent', 'sent:<provider id>',
-- 'rejected', 'refused:<why>'), when the record says not to send: another
-- attempt holds its claim, or it has a final record. A duplicate takes
-- nothing (a recovery floor is no slot, and is kept). Writes, once
-- allowed, the claim: 'claim:<token>', or '<attempts>#claim:<token>' once
-- its sends are counted; the state '' (a claim given back, its count
-- kept) is free to claim.

-- @claim
local token = ARGV[16]
if token ~= '' and s[9] then
  local n, state = string.match(s[9], '^(%d+)#(.*)$')
  if n then
    attempts = num(n) or 0
  else
    state = s[9]
  end
  if state ~= '' and state ~= 'claim:' .. token then
    if string.sub(state, 1, 6) == 'claim:' then
      state = 'held'
    end
    return stop(0, R.RECORD, state)
  end
end

-- @after
if token ~= '' then
  local n = attempts
  if ARGV[18] == '1' then
    n = n + 1
  end
  local v = 'claim:' .. token
  if n > 0 then
    v = n .. '#' .. v
  end
  redis.call('SET', KEYS[9], v, 'PX', math.ceil(wait / 1000) + math.max(tonumber(ARGV[17]), 1))
end
