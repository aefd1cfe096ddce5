-- Acquire or re-enter a fenced lock and take a fencing token (docs/protocol.md §8.2).
-- KEYS[1] lock hash, KEYS[2] token counter (no TTL, never expires)
-- ARGV[1] lease in ms, ARGV[2] owner field
-- Returns {-1, token} when acquired or re-entered (every acquisition takes a new token), else
-- {PTTL, -1}.
if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    local token = redis.call('incr', KEYS[2])
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {-1, token}
end
return {redis.call('pttl', KEYS[1]), -1}
