-- Shared by the local hand-off scripts (see src/cohort.rs): one step from one owner to the next, so
-- that to every client, Java's included, the lock stays held; nothing is published.

-- Passes the hold of `from` in `lock` to `to` for `lease` ms, if `from` holds it exactly once and the
-- hash has `fields` fields (nobody else shares it). The next owner's field is written before the
-- releasing owner's is removed, so the key never disappears.
-- Returns nil when `from` holds nothing (its lease was lost), 0 when it holds more than once or
-- shares the hash (nothing changed: it unlocks as usual), 1 when passed.
local function pass(lock, from, to, lease, fields)
    local count = redis.call('hget', lock, from)
    if count == false then
        return nil
    end
    if tonumber(count) ~= 1 or redis.call('hlen', lock) ~= fields then
        return 0
    end
    redis.call('hset', lock, to, 1)
    redis.call('hdel', lock, from)
    redis.call('pexpire', lock, lease)
    return 1
end
