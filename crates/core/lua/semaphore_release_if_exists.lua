-- Give permits back to a semaphore that exists, and wake waiters (docs/protocol.md §8.5,
-- releaseIfExists).
-- KEYS[1] semaphore value, KEYS[2] semaphore channel
-- ARGV[1] permits to give back (> 0), ARGV[2] publish command
-- Returns 1 when given back (the new count is published), 0 when the semaphore does not exist.
if redis.call('exists', KEYS[1]) == 0 then
    return 0
end
local available = redis.call('incrby', KEYS[1], ARGV[1])
redis.call(ARGV[2], KEYS[2], available)
return 1
