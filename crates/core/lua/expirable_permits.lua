-- Available and taken permits, after reclaiming expired ones (Redisson's availablePermits,
-- acquiredPermits and getPermits).
-- KEYS[1] available permits, KEYS[2] timeouts sorted set, KEYS[3] semaphore channel
-- ARGV[1] now (epoch ms), ARGV[2] publish command
-- Returns {available, taken}.
reclaim_expired(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2], -1)
return {tonumber(redis.call('get', KEYS[1]) or 0), redis.call('zcard', KEYS[2])}
