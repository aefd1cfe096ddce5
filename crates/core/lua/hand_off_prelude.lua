-- Shared by the local hand-off scripts (see src/cohort.rs): one step from one owner to the next, so
-- that to every client, Java's included, the lock stays held; nothing is published.
--
-- A hand-off runs under a latch, as an unlock does (docs/protocol.md §2.3): its outcome is stored
-- at a request id, and a re-send of the same call (after a lost reply) replays that outcome instead
-- of acting again. So a lost reply is reconciled by re-sending, never by undoing an owner's field:
-- an undo by field could not tell the hold the hand-off gave from one its owner took since.

-- The stored outcome of a hand-off that already ran under `latch`: true and the outcome (nil, 0 or a
-- positive integer), or false when none ran.
local function replay(latch)
    local stored = redis.call('get', latch)
    if stored == false then
        return false, nil
    end
    if stored == 'nil' then
        return true, nil
    end
    return true, tonumber(stored)
end

-- Stores `outcome` at `latch` for `ttl` ms, and returns it.
local function settle(latch, ttl, outcome)
    local stored = 'nil'
    if outcome ~= nil then
        stored = tostring(outcome)
    end
    redis.call('set', latch, stored, 'px', ttl)
    return outcome
end

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
