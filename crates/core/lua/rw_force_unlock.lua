-- Delete a read-write lock held in one mode, whoever holds it (docs/protocol.md §7.6).
-- KEYS[1] lock hash, KEYS[2] channel; ARGV[1] the mode ("read" or "write"), ARGV[2] the message
-- ("0" for read, "1" for write), ARGV[3] publish command
-- Returns 1 when the lock was held in that mode and deleted, else 0.
if redis.call('hget', KEYS[1], 'mode') == ARGV[1] then
    redis.call('del', KEYS[1])
    redis.call(ARGV[3], KEYS[2], ARGV[2])
    return 1
end
return 0
