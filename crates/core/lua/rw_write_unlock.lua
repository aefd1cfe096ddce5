-- Release one write hold, idempotently (docs/protocol.md §7.5, HEAD: a missing lock replies nil).
-- KEYS[1] lock hash, KEYS[2] channel, KEYS[3] unlock latch
-- ARGV[1] unlock message "1" (wake all), ARGV[2] lease in ms re-applied while still held,
-- ARGV[3] owner write field, ARGV[4] publish command, ARGV[5] latch TTL in ms
local replayed = redis.call('get', KEYS[3])
if replayed then
    return tonumber(replayed)
end
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
    redis.call(ARGV[4], KEYS[2], ARGV[1])
    redis.call('set', KEYS[3], 1, 'px', ARGV[5])
    return nil
end
local released = release_write(KEYS[1], mode, KEYS[2], ARGV[3], ARGV[2], ARGV[4], ARGV[1])
if released ~= nil then
    redis.call('set', KEYS[3], released, 'px', ARGV[5])
end
return released
