-- Delete a spin lock whoever holds it (docs/protocol.md §8.1: DEL, no publish).
-- KEYS[1] lock hash. Returns 1 when a lock was deleted, else 0.
return redis.call('del', KEYS[1])
