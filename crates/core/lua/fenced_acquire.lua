-- Acquire or re-enter a fenced lock and take a fencing token (docs/protocol.md §8.2).
-- KEYS[1] lock hash, KEYS[2] token counter (no TTL, never expires)
-- ARGV[1] lease in ms, ARGV[2] owner field, ARGV[3] (rlock only) the owner's hold count as the
-- caller counts it
-- Returns {-1, token, count} when acquired or re-entered (every acquisition takes a new token;
-- count, rlock's own, is the owner's hold count after it: 1 when the field was created), else
-- {PTTL, -1};
-- {0} (rlock only: nothing written) when ARGV[3] > 0 and the owner's field is gone: the caller
-- sent it as a re-entry of a hold that was deleted, which must not re-create the field.
if tonumber(ARGV[3] or '0') > 0 and redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
    return {0}
end
if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    local token = redis.call('incr', KEYS[2])
    local count = redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {-1, token, count}
end
return {redis.call('pttl', KEYS[1]), -1}
