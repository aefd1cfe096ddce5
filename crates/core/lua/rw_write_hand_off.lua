-- Pass a write lock from its owner's last write hold to another owner of the same client, in one
-- step (local hand-off, see src/cohort.rs). Nothing is published; to every client the lock stays
-- write-locked. A writer that also holds read locks of this lock never passes it.
-- KEYS[1] lock hash
-- ARGV[1] releasing owner's write field, ARGV[2] next owner's write field,
-- ARGV[3] next owner's lease in ms
-- Returns nil when the releasing owner holds no write lock (its lease was lost), 0 when it holds
-- more than once or also holds read locks (nothing changed: it unlocks as usual), 1 when passed.
if redis.call('hget', KEYS[1], 'mode') ~= 'write' then
    return nil
end
local count = redis.call('hget', KEYS[1], ARGV[1])
if count == false then
    return nil
end
if tonumber(count) ~= 1 or redis.call('hlen', KEYS[1]) ~= 2 then
    return 0
end
redis.call('hset', KEYS[1], ARGV[2], 1)
redis.call('hdel', KEYS[1], ARGV[1])
redis.call('pexpire', KEYS[1], ARGV[3])
return 1
