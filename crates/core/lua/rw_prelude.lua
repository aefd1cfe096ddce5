-- Shared by the read-write lock's scripts (docs/protocol.md §7).

-- Releases one read hold of `field` (§7.3 steps 3-7, after the latch and missing-lock checks) of a
-- lock in `mode`. `timeouts` is the holder's timeout key prefix `{N}:<field>:rwlock_timeout`,
-- `key_prefix` the prefix all holders' timeout keys share (`{N}`). The lock's TTL becomes the longest
-- left among the remaining read holds; with none alive (and no writer), the lock is deleted and
-- `message` published.
-- Returns nil when `field` holds no read lock, 0 when the lock is still held, 1 when released.
local function release_read(lock, mode, channel, timeouts, key_prefix, field, publish, message)
    if redis.call('hexists', lock, field) == 0 then
        return nil
    end
    local count = redis.call('hincrby', lock, field, -1)
    if count == 0 then
        redis.call('hdel', lock, field)
    end
    redis.call('del', timeouts .. ':' .. (count + 1))
    if redis.call('hlen', lock) > 1 then
        local longest = -3
        local fields = redis.call('hkeys', lock)
        for _, holder in ipairs(fields) do
            local holds = tonumber(redis.call('hget', lock, holder))
            if holds ~= nil then
                for k = holds, 1, -1 do
                    local left = redis.call('pttl', key_prefix .. ':' .. holder .. ':rwlock_timeout:' .. k)
                    longest = math.max(longest, left)
                end
            end
        end
        if longest > 0 then
            redis.call('pexpire', lock, longest)
            return 0
        end
        if mode == 'write' then
            return 0
        end
    end
    redis.call('del', lock)
    redis.call(publish, channel, message)
    return 1
end

-- Releases one write hold of `field` (§7.5 step 3) of a lock in `mode`. A writer that also holds
-- read locks keeps them: the lock turns into a read lock, and nothing is published.
-- Returns nil when `field` holds no write lock, 0 when still held (re-entrantly), 1 when released.
local function release_write(lock, mode, channel, field, lease, publish, message)
    if mode ~= 'write' or redis.call('hexists', lock, field) == 0 then
        return nil
    end
    if redis.call('hincrby', lock, field, -1) > 0 then
        redis.call('pexpire', lock, lease)
        return 0
    end
    redis.call('hdel', lock, field)
    if redis.call('hlen', lock) == 1 then
        redis.call('del', lock)
        redis.call(publish, channel, message)
    else
        redis.call('hset', lock, 'mode', 'read')
    end
    return 1
end
