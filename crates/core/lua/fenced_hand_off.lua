-- Pass a fenced lock from its owner's last hold to another owner of the same client, with a new
-- fencing token for the next owner: as every acquisition, a hand-off moves the token counter.
-- KEYS[1] lock hash, KEYS[2] token counter, KEYS[3] the hand-off's latch
-- ARGV[1] releasing owner's field, ARGV[2] next owner's field, ARGV[3] next owner's lease in ms,
-- ARGV[4] latch TTL in ms
-- Returns nil (the releasing owner holds nothing), 0 (not passed, nothing changed) or, when passed,
-- the next owner's token; a re-send under the same latch returns the first outcome and changes
-- nothing.
local replayed, outcome = replay(KEYS[3])
if replayed then
    return outcome
end
local passed = pass(KEYS[1], ARGV[1], ARGV[2], ARGV[3], 1)
if passed == 1 then
    passed = redis.call('incr', KEYS[2])
end
return settle(KEYS[3], ARGV[4], passed)
