-- Undo an acquire whose reply never reached its caller (timed out or cancelled).
-- It is sent on the same connection, after the acquire, so it runs after it if the acquire ran at all.
-- KEYS[1] lock hash, KEYS[2] unlock channel
-- ARGV[1] owner field, ARGV[2] the hold count the owner had before the acquire,
-- ARGV[3] lease in ms re-applied while still held, ARGV[4] publish command, ARGV[5] unlock message "0"
-- Returns 1 when the acquire had run and was undone, else 0.
local count = tonumber(redis.call('hget', KEYS[1], ARGV[1]) or '0')
if count <= tonumber(ARGV[2]) then
    return 0
end
if count > 1 then
    redis.call('hincrby', KEYS[1], ARGV[1], -1)
    redis.call('pexpire', KEYS[1], ARGV[3])
    return 1
end
redis.call('del', KEYS[1])
redis.call(ARGV[4], KEYS[2], ARGV[5])
return 1
