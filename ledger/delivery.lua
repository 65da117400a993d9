#!lua flags=no-writes
-- delivery.lua reads the account's delivery counters (receipt.lua writes
-- them) of the last minutes, for `dispatcher status`, in one call that
-- writes nothing (run with EVALSHA_RO). The current minute is the
-- caller's clock (a read-only script may not read TIME everywhere:
-- miniredis refuses it); pods' clocks agree within far less than the
-- minute, as the sent counters' seconds do.
--
-- KEYS[1] -> the owed set ({sms:<account>}:owed): the slot, and the prefix
--            of the counters ({sms:<account>}:dlr:<class>:<unix minute>)
-- ARGV[1] -> whole minutes to read, the current one included (clamped to
--            [1, 10]: the counters live 10 minutes)
-- ARGV[2] -> the current unix minute
-- ARGV[3..] -> the classes' names
--
-- Returns {{field, value, ...}, ...}: per class, in ARGV's order, the
-- fields of each of its minutes' counters one after the other.
local pre = string.sub(KEYS[1], 1, -5)
local minutes = math.min(math.max(tonumber(ARGV[1]) or 1, 1), 10)
local minute = math.floor(tonumber(ARGV[2]) or 0)
local out = {}
for c = 3, #ARGV do
  local fields = {}
  for m = minute - minutes + 1, minute do
    local f = redis.call('HGETALL', pre .. 'dlr:' .. ARGV[c] .. ':' .. m)
    for i = 1, #f do
      fields[#fields + 1] = f[i]
    end
  end
  out[#out + 1] = fields
end
return out
