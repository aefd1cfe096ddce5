-- Take every available permit (docs/protocol.md §8.5, drainPermits).
-- KEYS[1] semaphore value
-- Returns the number of permits taken (0 when the semaphore does not exist). Publishes nothing.
local available = redis.call('get', KEYS[1])
if available == false then
    return 0
end
redis.call('set', KEYS[1], 0)
return tonumber(available)
