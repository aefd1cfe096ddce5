-- Acquire or re-enter a write lock (docs/protocol.md §7.4). A re-entry adds the lease to the PTTL.
-- KEYS[1] lock hash; ARGV[1] lease in ms, ARGV[2] owner write field `<field>:write`, ARGV[3] (rlock
-- only) the owner's write hold count as the caller counts it
-- Returns {count} when acquired or re-entered, the owner's hold count after it (1 when the field
-- was created; rlock's reply, where Redisson's is nil), else the PTTL;
-- {0} (rlock only: nothing written) when ARGV[3] > 0 and the owner's field is gone: the caller
-- sent it as a re-entry of a hold that was deleted, which must not re-create the field.
if tonumber(ARGV[3] or '0') > 0 and redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
    return {0}
end
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
    redis.call('hset', KEYS[1], 'mode', 'write')
    redis.call('hset', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {1}
end
if mode == 'write' and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    local count = redis.call('hincrby', KEYS[1], ARGV[2], 1)
    local left = redis.call('pttl', KEYS[1])
    redis.call('pexpire', KEYS[1], left + tonumber(ARGV[1]))
    return {count}
end
return redis.call('pttl', KEYS[1])
