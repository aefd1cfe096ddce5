-- Give permits back to a semaphore and wake waiters (docs/protocol.md §8.5, release).
-- KEYS[1] semaphore value, KEYS[2] semaphore channel
-- ARGV[1] permits to give back (> 0), ARGV[2] publish command (PUBLISH or SPUBLISH)
-- Creates the value when missing. Publishes the new number of available permits; returns it.
local available = redis.call('incrby', KEYS[1], ARGV[1])
redis.call(ARGV[2], KEYS[2], available)
return available
