-- Acquire or re-enter a reentrant lock (docs/protocol.md §2.2).
-- KEYS[1] lock hash
-- ARGV[1] lease in ms, ARGV[2] owner field "<node-uuid>:<owner-id>", ARGV[3] (rlock only) the
-- owner's hold count as the caller counts it
-- Returns {count} when acquired or re-entered (the owner's hold count after it: 1 when the field
-- was created; rlock's reply, where Redisson's is nil), else the lock's PTTL in ms;
-- {0} (rlock only: nothing written) when ARGV[3] > 0 and the owner's field is gone: the caller
-- sent it as a re-entry of a hold that was deleted, which must not re-create the field.
-- A non-hash value at KEYS[1] makes HEXISTS fail before anything is written.
if tonumber(ARGV[3] or '0') > 0 and redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
    return {0}
end
if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    local count = redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {count}
end
return redis.call('pttl', KEYS[1])
