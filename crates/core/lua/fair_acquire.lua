-- Acquire, re-enter or queue for a fair lock (docs/protocol.md §6.4 waiting form, §6.5
-- non-waiting form).
-- KEYS[1] lock hash, KEYS[2] queue (list of owner fields), KEYS[3] timeouts (zset: field -> deadline)
-- ARGV[1] lease in ms, ARGV[2] owner field, ARGV[3] wait in ms (how long a queued waiter may stay
-- before it counts as stale), ARGV[4] now (the client's wall clock, epoch ms), ARGV[5] 1 to queue
-- when busy (lock, tryLock with a wait), 0 not to (tryLock); ARGV[6] (rlock only) the owner's hold
-- count as the caller counts it; ARGV[7], for the non-reentrant fair lock only (§6.9), the error to
-- reply to a re-entry ("NON_REENTRANT_REACQUIRE")
-- Returns {count} when acquired or re-entered, the owner's hold count after it (1 when the field
-- was created; rlock's reply, where Redisson's is nil), or the error ARGV[7] for a refused
-- re-entry (nothing changes, and it never queues);
-- {0} (rlock only: nothing written) when ARGV[6] > 0 and the owner's field is gone: the caller
-- sent it as a re-entry of a hold that was deleted, which must not re-create the field.
-- it never queues then. When busy: with ARGV[5] = 1, the time to wait in ms (0:
-- someone else heads the queue of a free lock; re-poll soon); with ARGV[5] = 0, 1.
local wait = tonumber(ARGV[3])
local now = tonumber(ARGV[4])
if tonumber(ARGV[6] or '0') > 0 and redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
    return {0}
end
purge_stale(KEYS[2], KEYS[3], now)
if redis.call('exists', KEYS[1]) == 0
    and (redis.call('exists', KEYS[2]) == 0 or redis.call('lindex', KEYS[2], 0) == ARGV[2]) then
    redis.call('lpop', KEYS[2])
    redis.call('zrem', KEYS[3], ARGV[2])
    local waiting = redis.call('zrange', KEYS[3], 0, -1)
    for i = 1, #waiting do
        redis.call('zincrby', KEYS[3], -wait, waiting[i])
    end
    redis.call('hset', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {1}
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    if ARGV[7] then
        return redis.error_reply(ARGV[7])
    end
    -- rlock only (§6.4 step 3): an owner that also waits in the queue (another future of it queued
    -- before this one took the lock) leaves it, as its give-up would (§6.6).
    if redis.call('zscore', KEYS[3], ARGV[2]) ~= false then
        leave_queue(KEYS[2], KEYS[3], ARGV[2], wait)
    end
    local count = redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {count}
end
if ARGV[5] == '0' then
    return 1
end
if redis.call('zscore', KEYS[3], ARGV[2]) ~= false then
    return math.max(0, redis.call('pttl', KEYS[1]))
end
local ttl
local last = redis.call('lindex', KEYS[2], -1)
local last_deadline = false
if last ~= false and last ~= ARGV[2] then
    last_deadline = redis.call('zscore', KEYS[3], last)
end
if last_deadline ~= false then
    ttl = tonumber(last_deadline) - now
else
    ttl = redis.call('pttl', KEYS[1])
end
if redis.call('zadd', KEYS[3], ttl + wait + now, ARGV[2]) == 1 then
    redis.call('rpush', KEYS[2], ARGV[2])
end
return ttl
