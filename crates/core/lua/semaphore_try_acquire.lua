-- Take permits from a semaphore if that many are available (docs/protocol.md §8.5, tryAcquire).
-- KEYS[1] semaphore value (available permits, a string integer)
-- ARGV[1] permits to take (> 0)
-- Returns 1 when taken, 0 when fewer are available (or the semaphore is not set up).
local available = redis.call('get', KEYS[1])
if available ~= false and tonumber(available) >= tonumber(ARGV[1]) then
    redis.call('decrby', KEYS[1], ARGV[1])
    return 1
end
return 0
