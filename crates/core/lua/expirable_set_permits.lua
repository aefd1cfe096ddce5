-- Set the total number of permits, taken ones included (docs/protocol.md §8.6, setPermits).
-- KEYS[1] available permits, KEYS[2] semaphore channel, KEYS[3] timeouts sorted set
-- ARGV[1] the total, ARGV[2] publish command
-- A missing semaphore is created with the total available. Otherwise the available permits move by
-- the difference between the total and (available + taken). Publishes the total when it changed.
local available = redis.call('get', KEYS[1])
if available == false then
    redis.call('set', KEYS[1], ARGV[1])
    redis.call(ARGV[2], KEYS[2], ARGV[1])
    return 1
end
local total = tonumber(available) + redis.call('zcard', KEYS[3])
if total == tonumber(ARGV[1]) then
    return 0
end
redis.call('incrby', KEYS[1], tonumber(ARGV[1]) - total)
redis.call(ARGV[2], KEYS[2], ARGV[1])
return 1
