-- Shared by the group lock's scripts (docs/protocol.md §8.9). A group is one hash; a value (its
-- hash h, Redisson's Hash.hash128toBase64 of the encoded value) held by an owner has three fields:
-- h = the owner "<node-uuid>:<owner-id>", h:<owner>:expire_time = when the hold ends (epoch ms, on
-- the writer's clock), h:<owner>:lock_count = its hold count.
local function expire_field(h, owner)
    return h .. ':' .. owner .. ':expire_time'
end

local function count_field(h, owner)
    return h .. ':' .. owner .. ':lock_count'
end

-- When `owner`'s hold of `h` ends, or nil when its field is missing.
local function hold_end(key, h, owner)
    return tonumber(redis.call('hget', key, expire_field(h, owner)))
end

-- Whether h names `owner` and its hold has not ended at `now` (Java's unlock: expire_time >= now).
local function holds(key, h, owner, now)
    if redis.call('hget', key, h) ~= owner then
        return false
    end
    local ends = hold_end(key, h, owner)
    return ends ~= nil and ends >= now
end

-- Deletes value h's three fields, as held by `holder`.
local function free(key, h, holder)
    redis.call('hdel', key, h, expire_field(h, holder), count_field(h, holder))
end
