-- Acquire or re-enter a reentrant lock (docs/protocol.md §2.2).
-- KEYS[1] lock hash
-- ARGV[1] lease in ms, ARGV[2] owner field "<node-uuid>:<owner-id>"
-- Returns nil when acquired or re-entered, else the lock's PTTL in ms.
-- A non-hash value at KEYS[1] makes HEXISTS fail before anything is written.
if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return nil
end
return redis.call('pttl', KEYS[1])
