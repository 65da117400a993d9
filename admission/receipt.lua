#!lua
-- receipt.lua folds one delivery receipt into its message's state, in one
-- call: the provider id's key holds the message's story or leads to it,
-- the receipt is folded into its part, the parts into the message, and
-- what changed is returned; a final state owes a status event (the owed
-- set) and is counted in the account's delivery counters (by the
-- process: it returns what it counted, and a later call writes it,
-- ARGV[10]). With no receipt (ARGV[1] '') it is the sweep: it returns the
-- messages whose event has been owed the longest.
-- Either way it first clears the events published since the last call,
-- and writes the delivery counts it is given.
--
-- A message's story is the string at its first part's provider id's key,
-- {sms:<account>}:pid:<p1>, a JSON object of string fields (cjson), read
-- and written whole: one command each way, its lifetime kept (KEEPTTL).
-- A later part's key holds '<part>\t<p1>'; the id's key
-- {sms:<account>}:msg:<id> holds '1\t<p1>' when the id's record here does
-- not name the story (find, below). An older version kept the story at
-- the id's key, as this string or as a hash of the same fields, and each
-- part's key as '<part>:<id>': such a story is read where it is, as one,
-- and written back there as the string. finish.lua writes id, class,
-- sender, n (its parts), p<i> (part i's provider id) and sent (when its
-- send began: the admitted slot, ms on Redis's clock); this script
-- writes s<i> and c<i> (part i's status and error code), status, code and
-- at (the message's state, its error code, and when it became so, ms), ov
-- (the owed event's version, one more each time an event is owed), resend
-- (a resend payload given back after its publish failed: giveback.lua)
-- and resent ('1' once handed out).
--
-- A resend payload is handed out once: the fold that makes a failure
-- final takes it from its key, a sweep takes a payload given back from the
-- story; whatever becomes of the status event, it is never handed out
-- twice.
--
-- The fold, per part then per message: a final status beats an
-- intermediate one; a later final never replaces an earlier one unless it
-- is 'delivered'; an intermediate one goes only forward (the order of
-- RANK below); a duplicate changes nothing. The message is delivered
-- when all its parts are, failed (its first failed part's status) when a
-- part failed, else at its parts' furthest intermediate status (a
-- delivered part counts as the furthest, 'buffered', so that the state
-- does not hang on whether a part's intermediates came before its final).
--
-- KEYS[1] -> the provider id's key ({sms:<account>}:pid:<provider id>:
--            the story, or the way to it; a sweep: the owed set again)
-- KEYS[2] -> the owed set ({sms:<account>}:owed: each event owed, by when
--            it was owed, ms; its member is the id for the first version,
--            '<id>\t<version>' for a later one: member below). The story,
--            record, resend and counter keys are built from its prefix, so
--            they share its slot
-- ARGV[1] -> the receipt's status, one of the 11 names ('': a sweep)
-- ARGV[2] -> its error code ('' none)
-- ARGV[3] -> when the status happened, ms since the epoch (below 1:
--            Redis's clock)
-- ARGV[4] -> the owed set's lifetime in milliseconds (clamped to
--            [1, 2^40])
-- ARGV[5] -> the delivery latency buckets' upper bounds in milliseconds,
--            ascending, space-separated; one more bucket counts the rest
-- ARGV[6] -> a sweep's age: events owed longer ago than this, in ms; a
--            receipt's: how long its message's event must have been owed
--            before a final receipt that changes nothing hands it out
--            again (still, below)
-- ARGV[7] -> the most events a sweep returns (0: it only clears)
-- ARGV[8] -> the route rule: '<ratio> <min_numbers> <window_s> <probe_us>
--            <keep_ms>' ('' off). A message whose story has a route
--            ('prefix': '<prefix> <number hash>', finish.lua keeps it for
--            the first class) counts, when it first becomes final, in its
--            account's route to that prefix if it says something of the
--            route: delivered, or failed for the route (ARGV[9]); a
--            failure for its recipient counts nowhere. With route
--            failures to at least <min_numbers> distinct numbers in the
--            last <window_s> and fewer than <ratio> of the verdicts
--            delivered, the route is skipped:
--            {sms:<account>}:skip:<prefix> is set to its next probe,
--            <probe_us> from now on Redis's clock (the admission script reads it),
--            living <keep_ms>, and each route failure while it lives keeps
--            it <keep_ms> more. A delivered message sent since the skip
--            was set (a probe) deletes it and the route's counts
-- ARGV[9] -> '1' when the receipt is a failure whose code names the route
--            (a carrier's filter), not the recipient
-- ARGV[10] -> the delivery counts the process kept since its last write:
--            space-separated triples '<key> <field> <n>', key the counters'
--            'dlr:<class>:<unix minute>' after the account's tag, each
--            added with one HINCRBY ('' none)
-- ARGV[11..] -> the events published: pairs of an id and the owed version
--            published, cleared in one ZREM of their members; an event
--            owed again since (another version, another member) stays
--
-- The delivery counters {sms:<account>}:dlr:<class>:<unix minute> (a hash
-- living 10 minutes from its first count: f the failures made final, b<i>
-- the delivered ones by latency bucket, the latency from 'sent' to the
-- receipt's arrival, t the failures turned delivered) count each message
-- once when it becomes final (f or a b<i>), and a failure that turns
-- delivered once more in its b<i> and in t; the fold returns those fields
-- and the process adds them up, written by a later call (ARGV[10]): the finals are f + the b<i> -
-- t, the delivered the b<i>. Counters written before this form also hold
-- finals and delivered (DeliveryStats reads both forms).
--
-- A route's counts {sms:<account>}:route:<prefix> (a hash): f<b> and d<b>
-- the route failures and the delivered of bucket b (Redis's clock in ms
-- over <window_s> * 1000 / 6), the last six buckets counted and older ones
-- dropped as new ones start; n<number hash> the bucket of the last route
-- failure to that number, for the <min_numbers> numbers that failed last
-- (one more replaces the oldest); and skip '<since_ms> <until_ms>' while
-- the route is skipped. The hash lives the window, and as long as the
-- skip: at most 12 buckets, 64 numbers and the skip, whatever the traffic.
--
-- Returns {changed, message...}: changed is 1 when the receipt changed its
-- message's state; each message is {id, class, sender, first provider id,
-- status, error code, sent_ms, status_ms, owed, version, resend, story
-- key, counters' key, fields counted}: owed 1
-- when an event is owed for this state (made owed now, or owed still: a
-- final state whose id is in the owed set), version its ov, resend the
-- payload to publish ('' none; handed out, it is no longer in Redis),
-- the counters' key ('dlr:<class>:<unix minute>', '' when nothing was
-- counted) and the fields it counted one each ('f', 'b<i>', 'b<i> t'). A
-- receipt returns one message, or none when its provider id is unknown
-- (nothing written but the clearing).
-- Everything is read and checked before the first write: a script that
-- errors keeps the writes it made.

local FINAL = {delivered = true, undelivered = true, failed = true, expired = true, rejected = true}
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
local rule
if ARGV[8] ~= '' then
  local ratio, least, window, probe, keep = string.match(ARGV[8], '^(%S+) (%d+) (%d+) (%d+) (%d+)$')
  ratio = tonumber(ratio)
  if not ratio then
    return redis.error_reply('receipt.lua: a route rule not of the header\'s form')
  end
  rule = {ratio = ratio, least = tonumber(least), bucket = math.max(math.floor(tonumber(window) * 1000 / 6), 1),
    probe = math.min(tonumber(probe), 2 ^ 52), keep = math.min(math.max(tonumber(keep), 1), 2 ^ 40)}
end
-- PEXPIRE refuses a lifetime <= 0 and one past the clock's range.
life = math.min(math.max(life, 1), 2 ^ 40)
most = math.min(math.max(most, 0), 1000)
local bounds = {}
for b in string.gmatch(ARGV[5] or '', '%d+') do
  bounds[#bounds + 1] = tonumber(b)
end
local pre = string.sub(KEYS[2], 1, -5) -- '{sms:<account>}:'
local counts = {}
for w in string.gmatch(ARGV[10], '%S+') do
  counts[#counts + 1] = w
end
for i = 1, #counts, 3 do
  if string.sub(counts[i], 1, 4) ~= 'dlr:' or not counts[i + 1] or not string.match(counts[i + 2] or '', '^%d%d?%d?%d?%d?%d?%d?%d?%d?$') then
    return redis.error_reply('receipt.lua: delivery counts not of the header\'s form')
  end
end

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

-- read is the story v, the GET of key: its fields, or nil when there is
-- none (or it is not an object of strings).
local function read(key, v)
  if type(v) == 'table' and v.err then
    local f = redis.call('HGETALL', key) -- an older version's hash
    local h = {}
    for i = 1, #f, 2 do
      h[f[i]] = f[i + 1]
    end
    return h
  end
  local ok, h = pcall(cjson.decode, type(v) == 'string' and v or '')
  if not ok or type(h) ~= 'table' then
    return nil
  end
  for k, x in pairs(h) do
    if type(k) ~= 'string' or type(x) ~= 'string' then
      return nil
    end
  end
  return h
end

-- find reads the story key leads to, key a provider id's or an id's (id,
-- or nil when unknown): the story, its key, the part key names and the
-- message's id; nil when it leads to none. One GET when key holds the
-- story, two when it points to it.
local function find(key, id)
  local v = redis.pcall('GET', key)
  local part, to = string.match(type(v) == 'string' and v or '', '^(%d+)\t(.+)$')
  if not part then
    part, to = string.match(type(v) == 'string' and v or '', '^(%d+):(.+)$')
    if part then -- an older version's part key: the story at the id's key
      id, key = to, pre .. 'msg:' .. to
      v = redis.pcall('GET', key)
    end
  else
    key = pre .. 'pid:' .. to -- a later part's key, or the id's
    v = redis.pcall('GET', key)
  end
  local h = read(key, v)
  id = h and h.id or id -- an older version's story keeps no id
  if not h or not id then
    return nil
  end
  return h, key, tonumber(part) or 1, id
end

-- byID finds id's story on the account: at the key of the provider id its
-- record names, else through the id's key (a send whose record is not
-- here, or is another id's), where an older version kept the story itself.
local function byID(id)
  local pid = string.match(redis.call('GET', pre .. 'id:' .. id) or '', '^%d*#?sent:(.+)$')
  if pid then
    local h, key, _, found = find(pre .. 'pid:' .. pid)
    if h and found == id then
      return h, key
    end
  end
  local h, key, _, found = find(pre .. 'msg:' .. id, id)
  if h and found == id then
    return h, key
  end
  return nil
end

-- save writes story h at msg whole, keeping its lifetime.
local function save(msg, h)
  redis.call('SET', msg, cjson.encode(h), 'KEEPTTL')
end

-- member is the owed set's member of id's event of version v: the id for
-- the first (the owed set of older versions held ids alone), the id and v
-- apart by a tab for a later one, so that clearing a version leaves the
-- next one owed. A tab is in no id (ids are printable ASCII).
local function member(id, v)
  if num(v) <= 1 then
    return id
  end
  return id .. '\t' .. string.format('%d', num(v))
end

local function reply(id, h, owed, resend, key, dlr, counted)
  return {id, h.class or '', h.sender or '', h.p1 or '', h.status or '', h.code or '',
    num(h.sent), num(h.at), owed and 1 or 0, num(h.ov), resend, key, dlr or '', counted or ''}
end

-- The events published, in one call whatever their number. A resend
-- given back to a story whose event is published this way stays in it
-- unread: no sweep finds a story that is not owed, and a later delivered
-- (the one event owed after a failure) deletes it.
if #ARGV >= 11 then
  local done = {}
  for i = 11, #ARGV - 1, 2 do
    done[#done + 1] = member(ARGV[i], ARGV[i + 1])
  end
  redis.call('ZREM', KEYS[2], unpack(done))
end

-- The delivery counts the process kept, one HINCRBY each; a field's first
-- count gives the counters their lifetime.
for i = 1, #counts, 3 do
  local key = pre .. counts[i]
  if redis.call('HINCRBY', key, counts[i + 1], counts[i + 2]) == tonumber(counts[i + 2]) then
    redis.call('PEXPIRE', key, 600000)
  end
end

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

-- route counts a final of message h in its account's route to its prefix
-- (first: its first final) when it says something of the route, delivered
-- or failed for the route, and skips the route, or clears the skip when h
-- is a probe that was delivered.
local function route(h, delivered, first)
  local prefix, number = string.match(h.prefix, '^(%S+) ?(%x*)$')
  if not prefix or not (delivered or ARGV[9] == '1') then
    return -- a failure for the recipient: no verdict on the route
  end
  local key, skip = pre .. 'route:' .. prefix, pre .. 'skip:' .. prefix
  local f = redis.call('HGETALL', key)
  local c = {}
  for i = 1, #f, 2 do
    c[f[i]] = f[i + 1]
  end
  local since, till = string.match(c.skip or '', '^(%d+) (%d+)$')
  since, till = num(since), num(till)
  local skipped = till > now
  if delivered and skipped and num(h.sent) >= since then
    redis.call('DEL', skip, key) -- the probe arrived: the route is back, counted afresh
    return
  end
  if not first then
    return
  end
  local b = math.floor(now / rule.bucket)
  local mine = ''
  if not delivered and number ~= '' then
    mine = 'n' .. number -- this failure's number, written below
  end
  local fails, got, numbers, old, oldest, oldest_b = 0, 0, 0, {}, nil, 0
  for k, v in pairs(c) do
    local kind, i = string.sub(k, 1, 1), nil
    if kind == 'f' or kind == 'd' then
      i = tonumber(string.sub(k, 2))
    elseif kind == 'n' and k ~= mine then
      i = num(v)
    end
    if i and i <= b - 6 then
      old[#old + 1] = k
    elseif kind == 'f' and i then
      fails = fails + num(v)
    elseif kind == 'd' and i then
      got = got + num(v)
    elseif i then
      numbers = numbers + 1
      if not oldest or i < oldest_b then
        oldest, oldest_b = k, i
      end
    end
  end
  local w
  if delivered then
    got = got + 1
    w = {'d' .. b, string.format('%d', num(c['d' .. b]) + 1)}
  else
    fails = fails + 1
    w = {'f' .. b, string.format('%d', num(c['f' .. b]) + 1)}
    if mine ~= '' then
      w[3], w[4], numbers = mine, string.format('%d', b), numbers + 1
      if numbers > rule.least and oldest then
        old[#old + 1], numbers = oldest, numbers - 1 -- the numbers kept are the last to fail
      end
    end
  end
  local mark = false
  if skipped and not delivered then
    -- A route failure while skipped (a probe's): the skip lives on.
    skipped = redis.call('PEXPIRE', skip, rule.keep) == 1
    since, mark = skipped and since or now, skipped
  end
  if not skipped and numbers >= rule.least and got < rule.ratio * (got + fails) then
    redis.call('SET', skip, string.format('%d', math.min(now * 1000 + rule.probe, 2 ^ 53 - 1)), 'PX', rule.keep)
    since, skipped, mark = now, true, true
  end
  if mark then
    till = now + rule.keep
    w[#w + 1], w[#w + 2] = 'skip', string.format('%d %d', since, till)
  end
  redis.call('HSET', key, unpack(w))
  if #old > 0 then
    redis.call('HDEL', key, unpack(old))
  end
  if not (c['f' .. b] or c['d' .. b]) or mark then
    -- A new bucket, or a new skip: the hash outlives both.
    local ttl = 6 * rule.bucket
    if skipped then
      ttl = math.max(ttl, till - now)
    end
    redis.call('PEXPIRE', key, ttl)
  end
end

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
    local key = pre .. 'resend:' .. id
    resend = redis.call('GET', key) or ''
    if resend ~= '' then
      redis.call('DEL', key)
      h.resent = '1'
    end
  end
  if rule and (h.prefix or '') ~= '' then
    route(h, new == 'delivered', not FINAL[old])
  end
end
save(msg, h)
return {changed and 1 or 0, reply(id, h, owed or still(h), resend, msg, dlr, counted)}
