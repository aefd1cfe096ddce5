-- Add (or, with a negative number, remove) available permits (docs/protocol.md §8.6, addPermits).
-- KEYS[1] available permits, KEYS[2] semaphore channel
-- ARGV[1] permits to add (may be negative), ARGV[2] publish command
-- Publishes the number added (not the new value, unlike the plain semaphore) when it is positive.
local available = tonumber(redis.call('get', KEYS[1]) or 0) + tonumber(ARGV[1])
redis.call('set', KEYS[1], available)
if tonumber(ARGV[1]) > 0 then
    redis.call(ARGV[2], KEYS[2], ARGV[1])
end
return available
