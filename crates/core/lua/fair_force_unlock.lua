-- Delete a fair lock whoever holds it and wake the queue head (docs/protocol.md §6.8); unlike
-- Redisson, also publish the unlock on the lock's own channel (the channel base), as
-- `RLock.forceUnlock` does for the same hash, so that waiters of the kinds sharing it, and a streak
-- of free hand-offs, hear it.
-- KEYS[1] lock hash, KEYS[2] queue, KEYS[3] timeouts, KEYS[4] channel base
-- ARGV[1] unlock message "0", ARGV[2] now (epoch ms), ARGV[3] publish command
-- Returns 1 when a lock was deleted, else 0.
purge_stale(KEYS[2], KEYS[3], tonumber(ARGV[2]))
if redis.call('del', KEYS[1]) == 1 then
    notify_head(KEYS[2], KEYS[4], ARGV[3], ARGV[1])
    redis.call(ARGV[3], KEYS[4], ARGV[1])
    return 1
end
return 0
