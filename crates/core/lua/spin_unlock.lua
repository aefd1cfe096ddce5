-- Release one hold of a spin lock, idempotently (docs/protocol.md §8.1: §2.3 without the publish).
-- KEYS[1] lock hash, KEYS[2] unlock latch of this request
-- ARGV[1] lease in ms re-applied while still held, ARGV[2] owner field, ARGV[3] latch TTL in ms
-- Returns 1 when released, 0 when still held, nil when not the owner. Publishes nothing: spin-lock
-- waiters poll, and Java's spin lock wakes nobody either.
local replayed = redis.call('get', KEYS[2])
if replayed then
    return tonumber(replayed)
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
    return nil
end
if redis.call('hincrby', KEYS[1], ARGV[2], -1) > 0 then
    redis.call('pexpire', KEYS[1], ARGV[1])
    redis.call('set', KEYS[2], 0, 'px', ARGV[3])
    return 0
end
redis.call('del', KEYS[1])
redis.call('set', KEYS[2], 1, 'px', ARGV[3])
return 1
