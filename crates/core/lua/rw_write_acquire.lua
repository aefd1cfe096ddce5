-- Acquire or re-enter a write lock (docs/protocol.md §7.4). A re-entry adds the lease to the PTTL.
-- KEYS[1] lock hash; ARGV[1] lease in ms, ARGV[2] owner write field `<field>:write`
-- Returns nil when acquired or re-entered, else the PTTL.
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
    redis.call('hset', KEYS[1], 'mode', 'write')
    redis.call('hset', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return nil
end
if mode == 'write' and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    local left = redis.call('pttl', KEYS[1])
    redis.call('pexpire', KEYS[1], left + tonumber(ARGV[1]))
    return nil
end
return redis.call('pttl', KEYS[1])
