-- Acquire or re-enter a read lock (docs/protocol.md §7.2). Readers share; a writer may also read.
-- KEYS[1] lock hash, KEYS[2] this holder's timeout key prefix `{N}:<field>:rwlock_timeout`
-- ARGV[1] lease in ms, ARGV[2] owner field, ARGV[3] the owner's write field `<field>:write`,
-- ARGV[4] (rlock only) the owner's read hold count as the caller counts it
-- Returns {count} when acquired (each hold gets its own timeout key `<prefix>:<k>`), the owner's
-- hold count after it (1 when the field was created; rlock's reply, where Redisson's is nil), else
-- the PTTL;
-- {0} (rlock only: nothing written) when ARGV[4] > 0 and the owner's field is gone: the caller
-- sent it as a re-entry of a hold that was deleted, which must not re-create the field.
if tonumber(ARGV[4] or '0') > 0 and redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
    return {0}
end
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
    redis.call('hset', KEYS[1], 'mode', 'read')
    redis.call('hset', KEYS[1], ARGV[2], 1)
    redis.call('set', KEYS[2] .. ':1', 1)
    redis.call('pexpire', KEYS[2] .. ':1', ARGV[1])
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {1}
end
if mode == 'read' or (mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 1) then
    local holds = redis.call('hincrby', KEYS[1], ARGV[2], 1)
    local timeout = KEYS[2] .. ':' .. holds
    redis.call('set', timeout, 1)
    redis.call('pexpire', timeout, ARGV[1])
    local left = redis.call('pttl', KEYS[1])
    redis.call('pexpire', KEYS[1], math.max(left, tonumber(ARGV[1])))
    return {holds}
end
return redis.call('pttl', KEYS[1])
