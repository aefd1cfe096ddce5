-- Release one hold of a fair lock, idempotently (docs/protocol.md §6.7).
-- KEYS[1] lock hash, KEYS[2] queue, KEYS[3] timeouts, KEYS[4] channel base
-- (`redisson_lock__channel:{name}`; each waiter listens on `<base>:<field>`), KEYS[5] unlock latch
-- ARGV[1] unlock message "0", ARGV[2] lease in ms re-applied while still held, ARGV[3] owner field,
-- ARGV[4] now (epoch ms), ARGV[5] publish command, ARGV[6] latch TTL in ms
-- Returns 1 when released, 0 when still held, nil when not the owner, and nil when the lock was
-- already gone (it still wakes the queue head there, as Redisson does; Redisson reports success,
-- rlock a lost hold: docs/protocol.md §6.7, §12).
local replayed = redis.call('get', KEYS[5])
if replayed then
    return tonumber(replayed)
end
purge_stale(KEYS[2], KEYS[3], tonumber(ARGV[4]))
if redis.call('exists', KEYS[1]) == 0 then
    notify_head(KEYS[2], KEYS[4], ARGV[5], ARGV[1])
    redis.call('set', KEYS[5], 'nil', 'px', ARGV[6])
    return nil
end
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
    return nil
end
if redis.call('hincrby', KEYS[1], ARGV[3], -1) > 0 then
    redis.call('pexpire', KEYS[1], ARGV[2])
    redis.call('set', KEYS[5], 0, 'px', ARGV[6])
    return 0
end
redis.call('del', KEYS[1])
redis.call('set', KEYS[5], 1, 'px', ARGV[6])
notify_head(KEYS[2], KEYS[4], ARGV[5], ARGV[1])
return 1
