-- Pass a fenced lock from its owner's last hold to another owner of the same client, with a new
-- fencing token for the next owner: as every acquisition, a hand-off moves the token counter.
-- KEYS[1] lock hash, KEYS[2] token counter
-- ARGV[1] releasing owner's field, ARGV[2] next owner's field, ARGV[3] next owner's lease in ms
-- Returns nil (the releasing owner holds nothing), 0 (not passed, nothing changed) or, when passed,
-- the next owner's token.
local passed = pass(KEYS[1], ARGV[1], ARGV[2], ARGV[3], 1)
if passed ~= 1 then
    return passed
end
return redis.call('incr', KEYS[2])
