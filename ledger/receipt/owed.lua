-- owed.lua: the owed set, the events owed and not yet published, and the
-- reply's message, with its owed event's version.
--
-- KEYS[2] -> the owed set ({sms:<account>}:owed: each event owed, by when
--            it was owed, ms; its member is the id for the first version,
--            '<id>\t<version>' for a later one: member below). The story,
--            record, resend and counter keys are built from its prefix, so
--            they share its slot
-- ARGV[11..] -> the events published: pairs of an id and the owed version
--            published, cleared in one ZREM of their members; an event
--            owed again since (another version, another member) stays

-- @define
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

-- @write
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
