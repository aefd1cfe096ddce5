-- Pass a write lock from its owner's last write hold to another owner of the same client. A writer
-- that also holds read locks of this lock (a third field besides `mode`) never passes it.
-- KEYS[1] lock hash, KEYS[2] the hand-off's latch
-- ARGV[1] releasing owner's write field, ARGV[2] next owner's write field,
-- ARGV[3] next owner's lease in ms, ARGV[4] latch TTL in ms
-- Returns nil (the releasing owner holds no write lock), 0 (not passed, nothing changed) or 1
-- (passed); a re-send under the same latch returns the first outcome and changes nothing.
local replayed, outcome = replay(KEYS[2])
if replayed then
    return outcome
end
local passed = nil
if redis.call('hget', KEYS[1], 'mode') == 'write' then
    passed = pass(KEYS[1], ARGV[1], ARGV[2], ARGV[3], 2)
end
return settle(KEYS[2], ARGV[4], passed)
