-- Acquire or re-enter a group lock's values, all or none (docs/protocol.md §8.9).
-- KEYS[1] group hash
-- ARGV[1] lease in ms, ARGV[2] now (epoch ms), ARGV[3] owner field "<node-uuid>:<owner-id>",
-- ARGV[4] the owner's hold count as the caller counts it, ARGV[5..] the values' hashes
-- Returns {count} when acquired or re-entered, the owner's hold count of the values after it (1
-- for a fresh hold; rlock's reply, where Redisson's is nil); else how long (ms) until the last
-- hold of another owner on one of the values ends; {0} (nothing written) when ARGV[4] > 0 and the
-- owner holds none of the values any more (a re-entry of a hold that ended or was deleted, which
-- must not be taken afresh as that re-entry); an error reply "GROUP_LOCK_REENTRY" (nothing
-- changes) when the owner's holds of the values are not ARGV[4] each.
local lease, now, owner = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
local held_before = tonumber(ARGV[4])
if held_before > 0 then
    local any = false
    for i = 5, #ARGV do
        if holds(KEYS[1], ARGV[i], owner, now) then
            any = true
        end
    end
    if not any then
        return {0}
    end
end
local last_end = -1
for i = 5, #ARGV do
    local holder = redis.call('hget', KEYS[1], ARGV[i])
    if holder and holder ~= owner then
        local ends = hold_end(KEYS[1], ARGV[i], holder)
        if ends ~= nil and ends > now and ends > last_end then
            last_end = ends
        end
    end
end
if last_end ~= -1 then
    return last_end - now
end
-- rlock only: every value is held as often as the caller counts (so the undo of this acquire can
-- tell its hold from the owner's others), or not at all (a fresh hold).
for i = 5, #ARGV do
    local count = 0
    if holds(KEYS[1], ARGV[i], owner, now) then
        count = tonumber(redis.call('hget', KEYS[1], count_field(ARGV[i], owner))) or -1
    end
    if count ~= held_before then
        return redis.error_reply('GROUP_LOCK_REENTRY the owner holds some of these values otherwise')
    end
end
local ends = now + lease
for i = 5, #ARGV do
    local h = ARGV[i]
    if held_before == 0 then
        -- A hold of another owner that ended, or an ended one of this owner, leaves no field.
        local holder = redis.call('hget', KEYS[1], h)
        if holder then
            free(KEYS[1], h, holder)
        end
        redis.call('hset', KEYS[1], h, owner)
        redis.call('hset', KEYS[1], expire_field(h, owner), ends)
        redis.call('hset', KEYS[1], count_field(h, owner), 1)
    else
        if hold_end(KEYS[1], h, owner) < ends then
            redis.call('hset', KEYS[1], expire_field(h, owner), ends)
        end
        redis.call('hincrby', KEYS[1], count_field(h, owner), 1)
    end
end
if redis.call('pttl', KEYS[1]) < lease then
    redis.call('pexpire', KEYS[1], lease)
end
return {held_before + 1}
