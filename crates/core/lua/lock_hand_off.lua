-- Pass a reentrant lock from its owner's last hold to another owner of the same client.
-- KEYS[1] lock hash, KEYS[2] the hand-off's latch
-- ARGV[1] releasing owner's field, ARGV[2] next owner's field, ARGV[3] next owner's lease in ms,
-- ARGV[4] latch TTL in ms
-- Returns nil (the releasing owner holds nothing), 0 (not passed, nothing changed) or 1 (passed);
-- a re-send under the same latch returns the first outcome and changes nothing.
local replayed, outcome = replay(KEYS[2])
if replayed then
    return outcome
end
return settle(KEYS[2], ARGV[4], pass(KEYS[1], ARGV[1], ARGV[2], ARGV[3], 1))
