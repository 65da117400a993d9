-- penalty.lua: a 429's penalty and an account-level pause stop every
-- process, and the probe after a penalty goes alone. Always in the script.
--
-- KEYS[3] -> penalty key ({sms:<account>}:penalty), set by penalty.lua on a 429
-- KEYS[7] -> probe key ({sms:<account>}:probe), set by penalty.lua: while
--            it lives (a second past a penalty's end) no slot is booked
--            ahead, so that the probe after a penalty goes alone
--
-- Returns ACCOUNT (detail: the pause's why, a penalty whose value starts
-- with 'account') or PENALTY while the penalty key lives, the wait its
-- remaining life. Sets lookahead to 0 while the probe key lives. Writes
-- nothing.

-- @check
if s[3] then
  local pen = redis.call('PTTL', KEYS[3])
  if pen > 0 then
    if string.sub(s[3], 1, 7) == 'account' then
      return deny(pen * 1000, R.ACCOUNT, s[3])
    end
    return deny(pen * 1000, R.PENALTY)
  end
end
if s[7] then
  lookahead = 0
end
