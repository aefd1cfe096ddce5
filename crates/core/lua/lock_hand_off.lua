-- Pass a reentrant lock from its owner's last hold to another owner of the same client, in one step
-- (local hand-off, see src/cohort.rs). To every client, Java's included, the lock stays held: the
-- owner's field is replaced by the next owner's, the lease re-applied, and nothing is published.
-- KEYS[1] lock hash
-- ARGV[1] releasing owner's field, ARGV[2] next owner's field, ARGV[3] next owner's lease in ms
-- Returns nil when the releasing owner holds nothing (its lease was lost), 0 when it holds more than
-- once or shares the hash (nothing changed: it unlocks as usual), 1 when passed.
local count = redis.call('hget', KEYS[1], ARGV[1])
if count == false then
    return nil
end
if tonumber(count) ~= 1 or redis.call('hlen', KEYS[1]) ~= 1 then
    return 0
end
redis.call('hset', KEYS[1], ARGV[2], 1)
redis.call('hdel', KEYS[1], ARGV[1])
redis.call('pexpire', KEYS[1], ARGV[3])
return 1
