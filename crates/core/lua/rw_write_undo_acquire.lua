-- Undo a write acquire whose reply never reached its caller (sent after it on the same connection).
-- KEYS[1] lock hash, KEYS[2] channel
-- ARGV[1] owner write field, ARGV[2] the hold count it had before, ARGV[3] lease in ms re-applied
-- while still held, ARGV[4] publish command, ARGV[5] unlock message "1"
-- Returns 1 when a hold was undone, else 0.
local count = tonumber(redis.call('hget', KEYS[1], ARGV[1]) or '0')
if count <= tonumber(ARGV[2]) then
    return 0
end
local mode = redis.call('hget', KEYS[1], 'mode')
release_write(KEYS[1], mode, KEYS[2], ARGV[1], ARGV[3], ARGV[4], ARGV[5])
return 1
