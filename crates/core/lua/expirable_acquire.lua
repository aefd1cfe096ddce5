-- Take permits with ids (docs/protocol.md §8.6, tryAcquire).
-- KEYS[1] available permits, KEYS[2] timeouts sorted set, KEYS[3] semaphore channel
-- ARGV[1] permits to take, ARGV[2] their expiry (epoch ms, or the non-expiring score),
-- ARGV[3] now (epoch ms), ARGV[4] the non-expiring score 922337203685477, ARGV[5] publish command,
-- ARGV[6..] the permit ids (raw 16 bytes each)
-- Returns 'OK' when taken; else ':<score>' with the nearest expiry of a taken permit (the longest
-- worth waiting), or nil when no taken permit expires.
reclaim_expired(KEYS[1], KEYS[2], KEYS[3], ARGV[3], ARGV[5], ARGV[1])
local available = redis.call('get', KEYS[1])
if available ~= false and tonumber(available) >= tonumber(ARGV[1]) then
    redis.call('decrby', KEYS[1], ARGV[1])
    for i = 6, #ARGV do
        redis.call('zadd', KEYS[2], ARGV[2], ARGV[i])
    end
    local ttl = redis.call('pttl', KEYS[1])
    if ttl > 0 then
        redis.call('pexpire', KEYS[2], ttl)
    end
    return 'OK'
end
local nearest = redis.call('zrange', KEYS[2], 0, 0, 'withscores')
if nearest[1] ~= nil and nearest[2] ~= ARGV[4] then
    return ':' .. nearest[2]
end
return nil
