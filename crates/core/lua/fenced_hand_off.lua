-- Pass a fenced lock from its owner's last hold to another owner of the same client, in one step
-- (local hand-off, see src/cohort.rs), with a new fencing token for the next owner: as for every
-- acquisition, the token counter moves. Nothing is published; to every client the lock stays held.
-- KEYS[1] lock hash, KEYS[2] token counter
-- ARGV[1] releasing owner's field, ARGV[2] next owner's field, ARGV[3] next owner's lease in ms
-- Returns nil when the releasing owner holds nothing (its lease was lost), 0 when it holds more than
-- once or shares the hash (nothing changed: it unlocks as usual), else the next owner's token.
local count = redis.call('hget', KEYS[1], ARGV[1])
if count == false then
    return nil
end
if tonumber(count) ~= 1 or redis.call('hlen', KEYS[1]) ~= 1 then
    return 0
end
local token = redis.call('incr', KEYS[2])
redis.call('hset', KEYS[1], ARGV[2], 1)
redis.call('hdel', KEYS[1], ARGV[1])
redis.call('pexpire', KEYS[1], ARGV[3])
return token
