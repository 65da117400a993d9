-- route.lua: a first-class message's final counted in its account's
-- route to its destination's prefix, and the route skipped while it does
-- not deliver (the admission script reads the skip).
--
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
--
-- A route's counts {sms:<account>}:route:<prefix> (a hash): f<b> and d<b>
-- the route failures and the delivered of bucket b (Redis's clock in ms
-- over <window_s> * 1000 / 6), the last six buckets counted and older ones
-- dropped as new ones start; n<number hash> the bucket of the last route
-- failure to that number, for the <min_numbers> numbers that failed last
-- (one more replaces the oldest); and skip '<since_ms> <until_ms>' while
-- the route is skipped. The hash lives the window, and as long as the
-- skip: at most 12 buckets, 64 numbers and the skip, whatever the traffic.

-- @check
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

-- @define
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
