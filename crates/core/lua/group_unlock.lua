-- Release one hold of each of a group lock's values, idempotently (docs/protocol.md §8.9, the
-- unlock latch of §2.3). Java's arguments, in Java's order.
-- KEYS[1] group hash, KEYS[2] its channel, KEYS[3] unlock latch of this request
-- ARGV[1] owner field, ARGV[2] unlock message "0", ARGV[3] lease in ms re-applied while still
-- held, ARGV[4] publish command, ARGV[5] latch TTL in ms, ARGV[6] now (epoch ms), ARGV[7..] values
-- Returns 1 when every value was freed, 0 when the owner still holds them, nil when it did not
-- hold one of them (the values it did hold are released all the same, as Java does). Publishes
-- when a value was freed.
local replayed = redis.call('get', KEYS[3])
if replayed then
    return tonumber(replayed)
end
local owner, now, lease = ARGV[1], tonumber(ARGV[6]), tonumber(ARGV[3])
local missing, freed, all_freed = false, false, true
for i = 7, #ARGV do
    local h = ARGV[i]
    if holds(KEYS[1], h, owner, now) then
        if redis.call('hincrby', KEYS[1], count_field(h, owner), -1) <= 0 then
            free(KEYS[1], h, owner)
            freed = true
        else
            if hold_end(KEYS[1], h, owner) < now + lease then
                redis.call('hset', KEYS[1], expire_field(h, owner), now + lease)
            end
            all_freed = false
        end
    else
        missing = true
    end
end
if freed then
    redis.call(ARGV[4], KEYS[2], ARGV[2])
end
-- Not latched: a re-send finds the same values missing and nothing of this owner's left to free.
if missing then
    return nil
end
if all_freed then
    redis.call('set', KEYS[3], 1, 'px', ARGV[5])
    return 1
end
redis.call('set', KEYS[3], 0, 'px', ARGV[5])
if redis.call('pttl', KEYS[1]) < lease then
    redis.call('pexpire', KEYS[1], lease)
end
return 0
