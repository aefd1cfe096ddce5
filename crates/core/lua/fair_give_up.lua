-- A waiter gives up its place in a fair lock's queue (docs/protocol.md §6.6).
-- KEYS[1] queue, KEYS[2] timeouts, KEYS[3] lock hash, KEYS[4] channel base
-- ARGV[1] owner field, ARGV[2] wait in ms it was queued with, ARGV[3] publish command,
-- ARGV[4] unlock message "0"
-- Unlike Redisson's, it wakes the new queue head when the lock is free: the head may have been
-- woken for the lock just before, and gave up instead of taking it, so nobody else would be told.
leave_queue(KEYS[1], KEYS[2], ARGV[1], tonumber(ARGV[2]))
if redis.call('exists', KEYS[3]) == 0 then
    notify_head(KEYS[1], KEYS[4], ARGV[3], ARGV[4])
end
return nil
