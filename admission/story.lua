#!lua flags=no-writes
-- story.lua reads an id's whole story on the account, for `dispatcher
-- message`, in one call that writes nothing (run with EVALSHA_RO).
--
-- KEYS[1] -> id record key ({sms:<account>}:id:<id>)
-- KEYS[2] -> the message's story ({sms:<account>}:msg:<id>; receipt.lua's
--            header gives its fields)
-- KEYS[3] -> the owed set ({sms:<account>}:owed)
-- KEYS[4] -> the message's resend payload ({sms:<account>}:resend:<id>)
-- ARGV[1] -> the message's id
--
-- Returns {record, {field, value, ...}, owed, resend}: record '' when
-- none; the story's fields (bounded: finish.lua keeps at most 64 parts);
-- owed 1 when its status event is owed; resend 1 while its payload waits
-- for a failure.
local owed = redis.call('ZSCORE', KEYS[3], ARGV[1])
return {
  redis.call('GET', KEYS[1]) or '',
  redis.call('HGETALL', KEYS[2]),
  owed and 1 or 0,
  redis.call('EXISTS', KEYS[4]),
}
