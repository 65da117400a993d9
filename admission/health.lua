#!lua flags=no-writes
-- health.lua reads an account's health for a process that made no other
-- script call on the account lately (it sends nothing there), so that it
-- learns the health other processes' sends wrote: at most one account
-- per heartbeat (status.Heartbeats). Run with EVALSHA_RO.
--
-- KEYS[1] -> the account's health ({sms:<account>}:health), read only:
--            finish.lua writes it, the admission script's header gives its format
--
-- Returns the account's health as the admission script reports it: 0 healthy (no key,
-- or one of another shape), 1 mode 'h' with a run of failures counted, 2
-- mode 'd' (degraded).

local mode, fails = string.match(redis.call('GET', KEYS[1]) or '', '^([hd]) (%d+) %d+ %d+ %d+ %d+ %d+$')
if mode == 'd' then
  return 2
elseif mode == 'h' and fails ~= '0' then
  return 1
end
return 0
