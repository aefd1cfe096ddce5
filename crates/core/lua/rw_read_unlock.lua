-- Release one read hold, idempotently (docs/protocol.md §7.3, HEAD: a missing lock replies nil).
-- KEYS[1] lock hash, KEYS[2] channel, KEYS[3] this holder's timeout key prefix, KEYS[4] the shared
-- key prefix `{N}`, KEYS[5] unlock latch
-- ARGV[1] unlock message "0", ARGV[2] owner field, ARGV[3] publish command, ARGV[4] latch TTL in ms
local replayed = redis.call('get', KEYS[5])
if replayed then
    return tonumber(replayed)
end
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
    redis.call(ARGV[3], KEYS[2], ARGV[1])
    redis.call('set', KEYS[5], 1, 'px', ARGV[4])
    return nil
end
local released = release_read(KEYS[1], mode, KEYS[2], KEYS[3], KEYS[4], ARGV[2], ARGV[3], ARGV[1])
if released ~= nil then
    redis.call('set', KEYS[5], released, 'px', ARGV[4])
end
return released
