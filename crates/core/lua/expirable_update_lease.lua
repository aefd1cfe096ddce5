-- Set a held permit's expiry anew (Redisson's updateLeaseTime).
-- KEYS[1] available permits, KEYS[2] timeouts sorted set, KEYS[3] semaphore channel
-- ARGV[1] the permit id (raw 16 bytes), ARGV[2] its new expiry (epoch ms), ARGV[3] now (epoch ms),
-- ARGV[4] publish command
-- Returns 1 when updated, 0 when the permit is not held (or had expired: it is reclaimed first).
reclaim_expired(KEYS[1], KEYS[2], KEYS[3], ARGV[3], ARGV[4], -1)
if redis.call('zscore', KEYS[2], ARGV[1]) == false then
    return 0
end
redis.call('zadd', KEYS[2], ARGV[2], ARGV[1])
return 1
