-- counts.lua: the delivery counts the process kept, written.
--
-- ARGV[10] -> the delivery counts the process kept since its last write:
--            space-separated triples '<key> <field> <n>', key the counters'
--            'dlr:<class>:<unix minute>' after the account's tag, each
--            added with one HINCRBY ('' none)
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

-- @check
local counts = {}
for w in string.gmatch(ARGV[10], '%S+') do
  counts[#counts + 1] = w
end
for i = 1, #counts, 3 do
  if string.sub(counts[i], 1, 4) ~= 'dlr:' or not counts[i + 1] or not string.match(counts[i + 2] or '', '^%d%d?%d?%d?%d?%d?%d?%d?%d?$') then
    return redis.error_reply('receipt.lua: delivery counts not of the header\'s form')
  end
end

-- @write
-- The delivery counts the process kept, one HINCRBY each; a field's first
-- count gives the counters their lifetime.
for i = 1, #counts, 3 do
  local key = pre .. counts[i]
  if redis.call('HINCRBY', key, counts[i + 1], counts[i + 2]) == tonumber(counts[i + 2]) then
    redis.call('PEXPIRE', key, 600000)
  end
end
