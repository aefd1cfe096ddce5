-- Watchdog renewal of a batch of read locks (docs/protocol.md §4.2, HEAD's ReadLockTask).
-- KEYS come in pairs: KEYS[2i-1] lock hash, KEYS[2i] its key prefix `{N}`.
-- ARGV[1] lease in ms; then for each pair: the number M of this client's holders, and their M fields.
-- Each holder still in the hash has its lock and every one of its timeout keys renewed.
-- Returns an array with one flag per pair: 1 when some holder was still there, else 0.
local renewed = {}
local arg = 2
for i = 1, #KEYS, 2 do
    local lock, prefix = KEYS[i], KEYS[i + 1]
    local holders = tonumber(ARGV[arg])
    arg = arg + 1
    local alive = false
    for _ = 1, holders do
        local field = ARGV[arg]
        arg = arg + 1
        local holds = redis.pcall('hget', lock, field)
        if type(holds) == 'string' then
            alive = true
            for k = tonumber(holds), 1, -1 do
                redis.call('pexpire', prefix .. ':' .. field .. ':rwlock_timeout:' .. k, ARGV[1])
            end
        end
    end
    if alive then
        redis.call('pexpire', lock, ARGV[1])
        renewed[#renewed + 1] = 1
    else
        renewed[#renewed + 1] = 0
    end
end
return renewed
