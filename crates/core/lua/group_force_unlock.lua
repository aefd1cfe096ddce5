-- Free a group lock's values whoever holds them, and wake the waiters (docs/protocol.md §8.9).
-- KEYS[1] group hash, KEYS[2] its channel
-- ARGV[1] unlock message "0", ARGV[2] publish command, ARGV[3..] the values
-- Returns 1 when a value was freed, else 0. Values nobody holds are skipped (Java's script fails
-- on the first of them, after freeing the ones before it).
local freed = false
for i = 3, #ARGV do
    local holder = redis.call('hget', KEYS[1], ARGV[i])
    if holder then
        free(KEYS[1], ARGV[i], holder)
        freed = true
    end
end
if not freed then
    return 0
end
redis.call(ARGV[2], KEYS[2], ARGV[1])
return 1
