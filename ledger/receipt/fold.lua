-- fold.lua: one receipt folded into its part, the parts into the message;
-- what changed returned, an event owed for a final state, a failure's
-- resend handed out, the route counted.
--
-- KEYS[1] -> the provider id's key ({sms:<account>}:pid:<provider id>:
--            the story, or the way to it; a sweep: the owed set again)
--
-- The fold, per part then per message: a final status beats an
-- intermediate one; a later final never replaces an earlier one unless it
-- is 'delivered'; an intermediate one goes only forward (the order of
-- RANK below); a duplicate changes nothing. The message is delivered
-- when all its parts are, failed (its first failed part's status) when a
-- part failed, else at its parts' furthest intermediate status (a
-- delivered part counts as the furthest, 'buffered', so that the state
-- does not hang on whether a part's intermediates came before its final).

-- @fold
local h, msg, part, id = find(KEYS[1])
if not h then
  return {0} -- unknown, or the story expired
end
local n = math.min(math.max(num(h.n), 1), MAX_PARTS)
if part < 1 or part > n then
  return {0} -- the key is of another story
end

-- still says whether the final state of message h is owed an event that
-- has not been published: a final receipt that changes nothing returns
-- it owed again (without the resend: that is handed out with the fold
-- that made the failure final, or by the sweep), so that the retry of a
-- fold whose answer was lost (a call that timed out after Redis ran it,
-- answered 503) or whose publish failed publishes it now, not the sweep.
-- An intermediate receipt does not, nor one that comes within ARGV[6] of
-- the event being owed: those come around the final one, while its own
-- fold is publishing.
local function still(h)
  if not (FINAL[status] and FINAL[h.status or '']) then
    return false
  end
  local since = tonumber(redis.call('ZSCORE', KEYS[2], member(id, h.ov)))
  return since ~= nil and now - since >= age
end

-- The part.
local cur = h['s' .. part]
if cur and (cur == 'delivered' or (FINAL[cur] and status ~= 'delivered') or
    (not FINAL[cur] and not FINAL[status] and RANK[status] <= (RANK[cur] or 0))) then
  return {0, reply(id, h, still(h), '', msg)}
end
if not FINAL[status] or status == 'delivered' then
  code = ''
end
h['s' .. part], h['c' .. part] = status, code

-- The message.
local old, old_code = h.status or '', h.code or ''
local delivered, fail, fail_code, best = 0, nil, '', 0
for i = 1, n do
  local s = h['s' .. i]
  if s == 'delivered' then
    delivered, best = delivered + 1, RANK.buffered
  elseif FINAL[s] then
    if not fail then
      fail, fail_code = s, h['c' .. i] or ''
    end
  elseif RANK[s] then
    best = math.max(best, RANK[s])
  end
end
local new, new_code = NAMES[best] or '', ''
if delivered == n then
  new = 'delivered'
elseif fail then
  new, new_code = fail, fail_code
end
if (FINAL[old] and new ~= 'delivered') or (not FINAL[old] and not FINAL[new] and (RANK[old] or 0) >= best) then
  new, new_code = old, old_code -- a final stands; an intermediate goes only forward
end

local changed = new ~= old or new_code ~= old_code
local owed = (FINAL[new] and not FINAL[old]) or (new == 'delivered' and FINAL[old] and old ~= 'delivered')
local resend, dlr, counted = ''
if changed then
  local when = now
  if at >= 1 then
    when = math.min(at, 2 ^ 53 - 1)
  end
  h.status, h.code, h.at = new, new_code, string.format('%d', when)
end
if owed then
  local before = h.ov
  h.ov = string.format('%d', num(h.ov) + 1)
  -- The owed set's lifetime is set by the sweeps and flushes.
  redis.call('ZADD', KEYS[2], now, member(id, h.ov))
  if num(before) > 0 then
    -- A failure turned delivered: its failure's event, if still owed,
    -- is owed no more, the delivered one stands for it.
    redis.call('ZREM', KEYS[2], member(id, before))
  end
  -- Counted by the process, written by a later call.
  dlr = 'dlr:' .. (h.class or '') .. ':' .. string.format('%d', math.floor(now / 60000))
  if new == 'delivered' then
    local latency, b = math.max(now - num(h.sent), 0), #bounds + 1
    for i = #bounds, 1, -1 do
      if latency <= bounds[i] then
        b = i
      end
    end
    counted = 'b' .. b
    if FINAL[old] then
      counted = counted .. ' t' -- counted final as the failure
    end
    -- Delivered after all: a resend not yet published is moot.
    h.resend = nil
  else
    counted = 'f'
    -- A failure made final: the resend payload, taken from its key and
    -- handed out once (a publish that fails gives it back: giveback.lua).
    -- A suppressed message is never resent: its payload is dropped.
    local key = pre .. 'resend:' .. id
    if new == 'suppressed' then
      redis.call('DEL', key)
    else
      resend = redis.call('GET', key) or ''
      if resend ~= '' then
        redis.call('DEL', key)
        h.resent = '1'
      end
    end
  end
  if rule and (h.prefix or '') ~= '' then
    route(h, new == 'delivered', not FINAL[old])
  end
end
save(msg, h)
return {changed and 1 or 0, reply(id, h, owed or still(h), resend, msg, dlr, counted)}
