-- How long a held permit has left (Redisson's getLeaseTime).
-- KEYS[1] available permits, KEYS[2] timeouts sorted set, KEYS[3] semaphore channel
-- ARGV[1] the permit id (raw 16 bytes), ARGV[2] now (epoch ms), ARGV[3] publish command,
-- ARGV[4] the non-expiring score 922337203685477
-- Returns the remaining ms, -1 for a permit that does not expire, nil when it is not held.
reclaim_expired(KEYS[1], KEYS[2], KEYS[3], ARGV[2], ARGV[3], -1)
local expires = redis.call('zscore', KEYS[2], ARGV[1])
if expires == false then
    return nil
end
if expires == ARGV[4] then
    return -1
end
return tonumber(expires) - tonumber(ARGV[2])
