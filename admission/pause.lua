#!lua flags=no-writes
-- pause.lua reads the account's penalty, for a process whose pulls are
-- stopped by an account-level pause and that must learn when it ends
-- (ResumeAccount elsewhere, or its time running out) without asking for a
-- send slot. It writes nothing.
--
-- KEYS[1] -> penalty key ({sms:<account>}:penalty)
--
-- Returns {remaining milliseconds (<= 0: none), why ('' when none)}.

local left = redis.call('PTTL', KEYS[1])
if left <= 0 then
  return {0, ''}
end
return {left, redis.call('GET', KEYS[1]) or ''}
