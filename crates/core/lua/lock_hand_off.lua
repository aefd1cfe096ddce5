-- Pass a reentrant lock from its owner's last hold to another owner of the same client.
-- KEYS[1] lock hash
-- ARGV[1] releasing owner's field, ARGV[2] next owner's field, ARGV[3] next owner's lease in ms
-- Returns nil (the releasing owner holds nothing), 0 (not passed, nothing changed) or 1 (passed).
return pass(KEYS[1], ARGV[1], ARGV[2], ARGV[3], 1)
