-- Undo a group acquire whose reply never reached its caller (docs/protocol.md §8.9, §2.9). Sent on
-- the same connection, after the acquire, so it runs after it if the acquire ran at all.
-- KEYS[1] group hash, KEYS[2] its channel
-- ARGV[1] owner field, ARGV[2] the owner's hold count before the acquire (the acquire checked that
-- every value had it), ARGV[3] publish command, ARGV[4] unlock message "0", ARGV[5..] the values
-- Returns 1 when the acquire had run and was undone, else 0.
local owner, before = ARGV[1], tonumber(ARGV[2])
for i = 5, #ARGV do
    if redis.call('hget', KEYS[1], ARGV[i]) ~= owner
        or tonumber(redis.call('hget', KEYS[1], count_field(ARGV[i], owner))) ~= before + 1 then
        return 0
    end
end
for i = 5, #ARGV do
    if before == 0 then
        free(KEYS[1], ARGV[i], owner)
    else
        redis.call('hincrby', KEYS[1], count_field(ARGV[i], owner), -1)
    end
end
if before == 0 then
    redis.call(ARGV[3], KEYS[2], ARGV[4])
end
return 1
