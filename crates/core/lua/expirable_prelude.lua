-- Shared by the permit-expirable semaphore's scripts (docs/protocol.md §8.6).
-- Permits are members of the timeouts sorted set (raw 16-byte ids) scored by their expiry in epoch
-- ms; non-expiring ones score 922337203685477.

-- Counts permits that expired by `now` back in (at most `limit` of them, -1 for all), and publishes
-- the new number of available permits when it is positive.
local function reclaim_expired(permits, timeouts, channel, now, publish, limit)
    local expired = redis.call('zrangebyscore', timeouts, 0, now, 'limit', 0, limit)
    if #expired > 0 then
        redis.call('zrem', timeouts, unpack(expired))
        local available = redis.call('incrby', permits, #expired)
        if available > 0 then
            redis.call(publish, channel, available)
        end
    end
end
