-- Set a count-down latch's count if it has none (docs/protocol.md §8.7, trySetCount).
-- KEYS[1] latch count, KEYS[2] latch channel
-- ARGV[1] the closing message "1", ARGV[2] the count, ARGV[3] publish command
-- Returns 1 when set (and the closing message is published), 0 when a count exists.
if redis.call('exists', KEYS[1]) == 0 then
    redis.call('set', KEYS[1], ARGV[2])
    redis.call(ARGV[3], KEYS[2], ARGV[1])
    return 1
end
return 0
