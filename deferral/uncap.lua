-- uncap: give back the place an id took (cap) and was not sent with.
-- KEYS[1] the number's sends. ARGV[1] id.
return redis.call('ZREM', KEYS[1], ARGV[1])
