-- Undo a read acquire whose reply never reached its caller (sent after it on the same connection).
-- KEYS[1] lock hash, KEYS[2] channel, KEYS[3] this holder's timeout key prefix, KEYS[4] `{N}`
-- ARGV[1] owner field, ARGV[2] the hold count the owner had before, ARGV[3] publish command,
-- ARGV[4] unlock message "0"
-- Returns 1 when a hold was undone, else 0.
local count = tonumber(redis.call('hget', KEYS[1], ARGV[1]) or '0')
if count <= tonumber(ARGV[2]) then
    return 0
end
local mode = redis.call('hget', KEYS[1], 'mode')
release_read(KEYS[1], mode, KEYS[2], KEYS[3], KEYS[4], ARGV[1], ARGV[3], ARGV[4])
return 1
