-- Release one hold of a reentrant lock, idempotently (docs/protocol.md §2.3, unlock latch form).
-- KEYS[1] lock hash, KEYS[2] unlock channel, KEYS[3] unlock latch of this request
-- ARGV[1] unlock message "0", ARGV[2] lease in ms re-applied while still held,
-- ARGV[3] owner field, ARGV[4] publish command (PUBLISH or SPUBLISH), ARGV[5] latch TTL in ms
-- Returns 1 when released (and published), 0 when still held, nil when not the owner.
-- A replay of the same request returns the stored result and changes nothing.
local replayed = redis.call('get', KEYS[3])
if replayed then
    return tonumber(replayed)
end
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
    return nil
end
if redis.call('hincrby', KEYS[1], ARGV[3], -1) > 0 then
    redis.call('pexpire', KEYS[1], ARGV[2])
    redis.call('set', KEYS[3], 0, 'px', ARGV[5])
    return 0
end
redis.call('del', KEYS[1])
redis.call(ARGV[4], KEYS[2], ARGV[1])
redis.call('set', KEYS[3], 1, 'px', ARGV[5])
return 1
