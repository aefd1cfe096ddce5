-- Delete a count-down latch (docs/protocol.md §8.7, delete).
-- KEYS[1] latch count, KEYS[2] latch channel
-- ARGV[1] the closing message "1", ARGV[2] publish command
-- Returns 1 when a count was deleted (and the closing message published), else 0.
if redis.call('del', KEYS[1]) == 1 then
    redis.call(ARGV[2], KEYS[2], ARGV[1])
    return 1
end
return 0
