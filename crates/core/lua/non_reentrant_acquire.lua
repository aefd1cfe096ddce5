-- Acquire a non-reentrant lock (docs/protocol.md §8.8): RLock's hash, but the owner cannot take
-- it twice.
-- KEYS[1] lock hash
-- ARGV[1] lease in ms, ARGV[2] owner field "<node-uuid>:<owner-id>", ARGV[3] the refusal
-- ("NON_REENTRANT_REACQUIRE"), ARGV[4] (rlock only) the owner's hold count as the caller counts it
-- Returns {1} when acquired (rlock's reply, where Redisson's is nil); an error reply ARGV[3] when
-- the owner already holds it (nothing changes); else the lock's PTTL in ms;
-- {0} (rlock only: nothing written) when ARGV[4] > 0 and the owner's field is gone: the caller
-- sent it as a re-entry of a hold that was deleted, which must not re-create the field.
-- A non-hash value at KEYS[1] makes HEXISTS fail before anything is written.
if tonumber(ARGV[4] or '0') > 0 and redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
    return {0}
end
if redis.call('exists', KEYS[1]) == 0 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {1}
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    return redis.error_reply(ARGV[3])
end
return redis.call('pttl', KEYS[1])
