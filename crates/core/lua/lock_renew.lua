-- Watchdog renewal of a batch of locks (docs/protocol.md §4.2).
-- KEYS[i] lock hash; ARGV[1] lease in ms; ARGV[i + 1] the owner field expected in KEYS[i]
-- Returns an array: 1 where the owner still holds KEYS[i] and its lease was renewed, else 0.
-- pcall keeps one odd key (e.g. a non-hash value) from failing the whole batch.
local renewed = {}
for i = 1, #KEYS do
    if redis.pcall('hexists', KEYS[i], ARGV[i + 1]) == 1 then
        redis.call('pexpire', KEYS[i], ARGV[1])
        renewed[i] = 1
    else
        renewed[i] = 0
    end
end
return renewed
