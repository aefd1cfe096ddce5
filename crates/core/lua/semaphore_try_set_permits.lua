-- Set up a semaphore (or a permit-expirable semaphore) that does not exist yet
-- (docs/protocol.md §8.5 and §8.6, trySetPermits).
-- KEYS[1] semaphore value, KEYS[2] semaphore channel
-- ARGV[1] permits, ARGV[2] publish command, ARGV[3] (optional) time to live in ms
-- Returns 1 when set (the permits are published), 0 when the semaphore already has a value.
if redis.call('get', KEYS[1]) ~= false then
    return 0
end
if ARGV[3] ~= nil then
    redis.call('set', KEYS[1], ARGV[1], 'px', ARGV[3])
else
    redis.call('set', KEYS[1], ARGV[1])
end
redis.call(ARGV[2], KEYS[2], ARGV[1])
return 1
