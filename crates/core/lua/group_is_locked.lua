-- Whether any of a group lock's values is held (docs/protocol.md §8.9), as Java's isLocked.
-- KEYS[1] group hash; ARGV[1] now (epoch ms), ARGV[2..] the values
-- Returns 1 when a value names a holder whose hold has not ended, else 0.
local now = tonumber(ARGV[1])
for i = 2, #ARGV do
    local holder = redis.call('hget', KEYS[1], ARGV[i])
    if holder and holds(KEYS[1], ARGV[i], holder, now) then
        return 1
    end
end
return 0
