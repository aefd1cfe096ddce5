-- Shared by every fair-lock script (docs/protocol.md §6.3): the stale purge that starts each of
-- them. Drops queue heads whose deadline (their score in the timeouts zset) is at or before `now`.
local function purge_stale(queue, timeouts, now)
    while true do
        local head = redis.call('lindex', queue, 0)
        if head == false then
            return
        end
        local deadline = tonumber(redis.call('zscore', timeouts, head))
        if deadline == nil or deadline > now then
            return
        end
        redis.call('zrem', timeouts, head)
        redis.call('lpop', queue)
    end
end

-- Publishes `message` to the queue head's own channel, if there is a head.
local function notify_head(queue, channel_base, publish, message)
    local head = redis.call('lindex', queue, 0)
    if head ~= false then
        redis.call(publish, channel_base .. ':' .. head, message)
    end
end

-- Takes `field` out of the queue: those behind it get `wait` taken off their deadlines (§6.6).
local function leave_queue(queue, timeouts, field, wait)
    local queued = redis.call('lrange', queue, 0, -1)
    local behind = false
    for i = 1, #queued do
        if behind then
            redis.call('zincrby', timeouts, -wait, queued[i])
        elseif queued[i] == field then
            behind = true
        end
    end
    redis.call('zrem', timeouts, field)
    redis.call('lrem', queue, 0, field)
end
