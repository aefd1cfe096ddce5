-- Pass a write lock from its owner's last write hold to another owner of the same client. A writer
-- that also holds read locks of this lock (a third field besides `mode`) never passes it.
-- KEYS[1] lock hash
-- ARGV[1] releasing owner's write field, ARGV[2] next owner's write field,
-- ARGV[3] next owner's lease in ms
-- Returns nil (the releasing owner holds no write lock), 0 (not passed, nothing changed) or 1
-- (passed).
if redis.call('hget', KEYS[1], 'mode') ~= 'write' then
    return nil
end
return pass(KEYS[1], ARGV[1], ARGV[2], ARGV[3], 2)
