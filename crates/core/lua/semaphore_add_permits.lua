-- Add (or, with a negative number, remove) available permits (docs/protocol.md §8.5, addPermits).
-- KEYS[1] semaphore value, KEYS[2] semaphore channel
-- ARGV[1] permits to add (may be negative), ARGV[2] publish command
-- Writes the new value with SET (which, as in Redisson, drops a TTL) and publishes it.
local available = tonumber(redis.call('get', KEYS[1]) or 0) + tonumber(ARGV[1])
redis.call('set', KEYS[1], available)
redis.call(ARGV[2], KEYS[2], available)
return available
