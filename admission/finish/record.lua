-- record.lua: the id's send-once record, written, or its claim given back.
--
-- KEYS[1] -> id record key ({sms:<account>}:id:<id>)
-- ARGV[1] -> the record: 'sent', 'sent:<provider id>' or 'refused:<reason>'
--            (refused, its dead letter not out yet), which overwrites any
--            claim (the outcome is a fact); 'rejected' (refused and
--            dead-lettered), written only over a record that still says
--            'refused:...': a replay of the dead letter may already have
--            cleared it (forget.lua), claimed the id and sent it, and its
--            record stands; or '' to give back the caller's claim, so that
--            a retry need not wait for it to expire
-- ARGV[2] -> record lifetime in milliseconds (clamped to [1, 2^40]): of the
--            record, or of the count a given-back claim keeps
-- ARGV[3] -> the caller's claim token ('' when it holds none)
--
-- Sets n, the reply's written, and life, the record's lifetime (its
-- story's too).

-- @read
-- SET PX and PEXPIRE refuse a lifetime <= 0 and one past the clock's range.
local life = math.min(math.max(tonumber(ARGV[2]) or 1, 1), 2 ^ 40)

-- @write
local n = 1
if ARGV[1] == 'rejected' then
  local v = redis.call('GET', KEYS[1])
  local count, state = string.match(v or '', '^(%d+)#(.*)$')
  if not count then
    state = v or ''
  end
  if string.sub(state, 1, 8) == 'refused:' then
    redis.call('SET', KEYS[1], (count and count .. '#' or '') .. 'rejected', 'PX', life)
  else
    n = 0
  end
elseif ARGV[1] ~= '' then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', life)
elseif ARGV[3] ~= '' then
  local v = redis.call('GET', KEYS[1])
  local count, state = string.match(v or '', '^(%d+)#(.*)$')
  if not count then
    state = v
  end
  if state ~= 'claim:' .. ARGV[3] then
    n = 0
  elseif count then
    -- The count of sends outlives the claim.
    redis.call('SET', KEYS[1], count .. '#', 'PX', life)
  else
    redis.call('DEL', KEYS[1])
  end
end
