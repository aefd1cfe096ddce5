-- Give one permit back by id (docs/protocol.md §8.6, tryRelease(id)).
-- KEYS[1] available permits, KEYS[2] semaphore channel, KEYS[3] timeouts sorted set
-- ARGV[1] the permit id (raw 16 bytes), ARGV[2] 1, ARGV[3] now (epoch ms), ARGV[4] publish command
-- Returns 1 when released; 0 when the id is not held, or had expired (it is counted back in then,
-- but the holder had lost it).
local expires = redis.call('zscore', KEYS[3], ARGV[1])
if redis.call('zrem', KEYS[3], ARGV[1]) ~= 1 then
    return 0
end
local available = redis.call('incrby', KEYS[1], ARGV[2])
redis.call(ARGV[4], KEYS[2], available)
if tonumber(expires) <= tonumber(ARGV[3]) then
    return 0
end
return 1
