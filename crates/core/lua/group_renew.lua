-- Watchdog renewal of a batch of group locks (docs/protocol.md §8.9, §4.2).
-- KEYS[i] group hash; ARGV[1] lease in ms; then, for each KEYS[i] in turn: now (epoch ms), the
-- number of this client's fields that may hold it, those fields, the number of values, the values.
-- Returns an array: 1 where every value is held (its hold not ended) by one of the fields and was
-- renewed (its expire_time raised to now + lease, the key's TTL to the lease), else 0 (nothing of
-- that group renewed).
local lease = tonumber(ARGV[1])
local renewed = {}
local at = 2
for i = 1, #KEYS do
    local now = tonumber(ARGV[at])
    local fields = {}
    for f = 1, tonumber(ARGV[at + 1]) do
        fields[ARGV[at + 1 + f]] = true
    end
    at = at + 2 + tonumber(ARGV[at + 1])
    local values = tonumber(ARGV[at])
    local held = {}
    for v = 1, values do
        local h = ARGV[at + v]
        -- pcall: one odd key (a non-hash value) does not fail the whole batch.
        local holder = redis.pcall('hget', KEYS[i], h)
        if type(holder) == 'string' and fields[holder] and holds(KEYS[i], h, holder, now) then
            held[#held + 1] = {h, holder}
        end
    end
    at = at + 1 + values
    if #held == values then
        for _, hold in ipairs(held) do
            if hold_end(KEYS[i], hold[1], hold[2]) < now + lease then
                redis.call('hset', KEYS[i], expire_field(hold[1], hold[2]), now + lease)
            end
        end
        if redis.call('pttl', KEYS[i]) < lease then
            redis.call('pexpire', KEYS[i], lease)
        end
        renewed[i] = 1
    else
        renewed[i] = 0
    end
end
return renewed
