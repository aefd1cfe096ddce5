-- Count a count-down latch down by one (docs/protocol.md §8.7, countDown).
-- KEYS[1] latch count, KEYS[2] latch channel
-- ARGV[1] the opening message "0", ARGV[2] publish command
-- At zero (or below: a missing count becomes -1) the key is deleted; reaching exactly zero
-- publishes the opening message. Returns the new count.
local count = redis.call('decr', KEYS[1])
if count <= 0 then
    redis.call('del', KEYS[1])
end
if count == 0 then
    redis.call(ARGV[2], KEYS[2], ARGV[1])
end
return count
