-- Whether a read-write lock is held in one mode (docs/protocol.md §7.6, the 3.24+ read form).
-- KEYS[1] lock hash; ARGV[1] "read" or "write"
-- A read lock counts as held too while its writer also holds reads (more than `mode` and the writer).
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == ARGV[1] then
    return 1
end
if ARGV[1] == 'read' and mode == 'write' and redis.call('hlen', KEYS[1]) > 2 then
    return 1
end
return 0
