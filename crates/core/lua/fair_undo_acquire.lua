-- Undo a fair-lock acquire whose reply never reached its caller. Sent on the same connection after
-- it, so it runs after it if it ran at all: it removes the hold it may have added and the queue
-- entry it may have made.
-- KEYS[1] lock hash, KEYS[2] queue, KEYS[3] timeouts, KEYS[4] channel base
-- ARGV[1] owner field, ARGV[2] the hold count the owner had before the acquire, ARGV[3] lease in
-- ms re-applied while still held, ARGV[4] publish command, ARGV[5] unlock message "0",
-- ARGV[6] wait in ms the acquire queued with
-- Returns 1 when a hold was undone, else 0.
leave_queue(KEYS[2], KEYS[3], ARGV[1], tonumber(ARGV[6]))
local count = tonumber(redis.call('hget', KEYS[1], ARGV[1]) or '0')
if count <= tonumber(ARGV[2]) then
    -- Left the queue only: a free lock's new head must hear of it (see fair_give_up.lua).
    if redis.call('exists', KEYS[1]) == 0 then
        notify_head(KEYS[2], KEYS[4], ARGV[4], ARGV[5])
    end
    return 0
end
if count > 1 then
    redis.call('hincrby', KEYS[1], ARGV[1], -1)
    redis.call('pexpire', KEYS[1], ARGV[3])
    return 1
end
redis.call('del', KEYS[1])
notify_head(KEYS[2], KEYS[4], ARGV[4], ARGV[5])
return 1
