-- Give several permits back by id, all or nothing (docs/protocol.md §8.6, tryRelease(ids)).
-- KEYS[1] available permits, KEYS[2] semaphore channel, KEYS[3] timeouts sorted set
-- ARGV[1] now (epoch ms), ARGV[2] publish command, ARGV[3..] the permit ids (raw 16 bytes each)
-- Returns the number released (published, as Redisson does), or 0 when any id is not held or
-- expired (then nothing changes but the reclaim of expired permits).
for i = 3, #ARGV do
    local expires = redis.call('zscore', KEYS[3], ARGV[i])
    if expires == false or tonumber(expires) <= tonumber(ARGV[1]) then
        return 0
    end
end
reclaim_expired(KEYS[1], KEYS[3], KEYS[2], ARGV[1], ARGV[2], -1)
local released = redis.call('zrem', KEYS[3], unpack(ARGV, 3))
redis.call('incrby', KEYS[1], released)
redis.call(ARGV[2], KEYS[2], released)
return released
