-- Delete a lock whoever holds it and wake a waiter (docs/protocol.md §2.5).
-- KEYS[1] lock hash, KEYS[2] unlock channel
-- ARGV[1] unlock message "0", ARGV[2] publish command (PUBLISH or SPUBLISH)
-- Returns 1 when a lock was deleted, else 0.
-- Unlike Redisson, a non-hash value at KEYS[1] is refused rather than deleted.
local kind = redis.call('type', KEYS[1])['ok']
if kind ~= 'hash' and kind ~= 'none' then
    return redis.error_reply('WRONGTYPE the lock key holds a ' .. kind .. ', not a lock hash')
end
if redis.call('del', KEYS[1]) == 1 then
    redis.call(ARGV[2], KEYS[2], ARGV[1])
    return 1
end
return 0
