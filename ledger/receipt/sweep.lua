-- sweep.lua: with no receipt (ARGV[1] ''), the messages whose event has
-- been owed the longest, returned to publish again; it ends the script.
--
-- ARGV[6] -> a sweep's age: events owed longer ago than this, in ms; a
--            receipt's: how long its message's event must have been owed
--            before a final receipt that changes nothing hands it out
--            again (still, below)
-- ARGV[7] -> the most events a sweep returns (0: it only clears)

-- @sweep
if status == '' then
  -- The sweeps and flushes keep the owed set alive, not each fold.
  redis.call('PEXPIRE', KEYS[2], life)
  local out = {0}
  if most > 0 then
    local members = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now - age, 'LIMIT', 0, most)
    for _, m in ipairs(members) do
      local id, v = string.match(m, '^(.*)\t(%d+)$')
      id = id or m
      local h, msg = byID(id)
      if h and m ~= member(id, h.ov) and not v then
        -- An id alone owed by an older version for a later event: owed
        -- again under the member its clearing will remove.
        redis.call('ZADD', KEYS[2], now, member(id, h.ov))
        redis.call('ZREM', KEYS[2], m)
      end
      if h and (not v or num(v) == num(h.ov)) then
        local resend = h.resend or ''
        if h.resend then
          h.resend = nil -- taken: handed out once
          save(msg, h)
        end
        out[#out + 1] = reply(id, h, true, resend, msg)
      else
        redis.call('ZREM', KEYS[2], m) -- its story expired, or a version since owed: nothing to publish
      end
    end
  end
  return out
end
