-- Whether an owner holds every one of a group lock's values (docs/protocol.md §8.9).
-- KEYS[1] group hash; ARGV[1] now (epoch ms), ARGV[2] owner field, ARGV[3..] the values
-- Returns 1 when each value names the owner and its hold has not ended, else 0. (Java's
-- isHeldByThread skips the first value and does not look at the value's field.)
local now, owner = tonumber(ARGV[1]), ARGV[2]
for i = 3, #ARGV do
    if not holds(KEYS[1], ARGV[i], owner, now) then
        return 0
    end
end
return 1
