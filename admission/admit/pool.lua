-- pool.lua: the sender pool. Each send also takes a slot of the sender
-- whose slot opens first. In the script of an account with a pool only.
--
-- KEYS[12+R+W..] -> the sender pool's keys, none without a pool. First
--            its floor ({sms:<account>}:tat:sender:): a recovery floor
--            (ARGV[6]) raises it, and every sender's TAT counts as at
--            least it. Its name is also the prefix of each sender's TAT
--            key ({sms:<account>}:tat:sender:<from>), which the script
--            names from the indexes' members: keys of the account's hash
--            slot, so that a pool of any size costs the same keys. Then
--            the pool's indexes, one per interval of ARGV[20]
--            ({sms:<account>}:pool:<hash>:<interval>, <hash> naming the
--            pool's configuration): sorted sets of the senders of that
--            interval, each scored by a lower bound of its TAT. The
--            sender's TAT key is the truth; a score left low by another
--            configuration's sends (a rolling deploy) is mended when
--            found. pool.lua builds a missing index
-- ARGV[20] -> the sender pool's emission intervals in microseconds, one
--            per index of KEYS[12+R+W..], space-separated ('' for no
--            pool). Each send also takes a slot of the sender whose slot
--            opens first: in each index the one of the lowest score (a
--            sorted set's first, O(log N)), whose TAT is read from its key;
--            of the indexes' firsts, the one whose slot opens first. A send
--            of cost c goes when sender TAT + (c - 1) * interval <= at and
--            moves that TAT to max(TAT, at) + c * interval, so that any
--            interval * rate window of the sender holds at most rate units
--            (a send of more units than that goes alone)
--
-- Sets pool, senders (the floor's key index), s_wait and pick (the
-- reply's sender). Returns POOL_MISSING when an index is missing (never
-- built, expired, or Redis lost it): nothing was decided, and the caller
-- builds it with pool.lua and asks again. Writes the sender's TAT, which
-- lives a second past itself (one key per number the pool ever held), and
-- its index's score.

-- @read
senders = KV + #res + #pushes -- the pool's floor key, then its indexes
pool = ARGV[20] ~= ''

-- @wait
-- Each index's first, its TAT read from its key. A score below that TAT
-- (the sender went through another configuration's index) is mended and
-- the index read again, a few times at most; past that the first found is
-- taken at its true TAT, which keeps every sender within its rate.
local s_int, s_tat, s_key = 0, 0, 0
if pool then
  local pfloor = num(s[senders]) or 0
  local g = 0
  for v in string.gmatch(ARGV[20], '%d+') do
    g = g + 1
    local k, iv, m, tat = senders + g, tonumber(v), nil, 0
    for _ = 1, 4 do
      local top = redis.call('ZRANGE', KEYS[k], 0, 0, 'WITHSCORES')
      if not top[1] then
        return stop(0, R.POOL_MISSING)
      end
      m = top[1]
      tat = math.max(num(redis.call('GET', KEYS[senders] .. m)) or 0, pfloor)
      if tat <= math.max(num(top[2]) or 0, now, pfloor) then
        break -- no other sender of the index opens earlier
      end
      redis.call('ZADD', KEYS[k], tat, m)
    end
    local w = tat + (cost - 1) * iv - now
    if not pick or w < s_wait then
      pick, s_wait, s_int, s_tat, s_key = m, w, iv, tat, k
    end
  end
end

-- @commit
if pick then
  -- A sender's TAT lives a second past itself, as penalty.lua's and
  -- override.lua's do: the key of a sender since removed from the pool
  -- goes away (a TAT in the past means the same as none).
  local keep_ms = 1000
  local v = math.min(math.max(s_tat, at) + cost * s_int, max_us)
  redis.call('SET', KEYS[senders] .. pick, string.format('%d', v), 'PX', math.max(math.ceil((v - now) / 1000), 0) + keep_ms)
  redis.call('ZADD', KEYS[s_key], v, pick)
end
