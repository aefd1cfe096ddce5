-- Undo an acquire whose reply was lost: give back whichever of its ids are held.
-- KEYS[1] available permits, KEYS[2] semaphore channel, KEYS[3] timeouts sorted set
-- ARGV[1] publish command, ARGV[2..] the acquire's permit ids (raw 16 bytes each)
-- An id that is not there was never added (or expired and was counted back in already).
-- Returns 1 when something was given back (and published), else 0.
local released = redis.call('zrem', KEYS[3], unpack(ARGV, 2))
if released == 0 then
    return 0
end
local available = redis.call('incrby', KEYS[1], released)
redis.call(ARGV[1], KEYS[2], available)
return 1
