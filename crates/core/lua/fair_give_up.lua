-- A waiter gives up its place in a fair lock's queue (PROTOCOL.md §6.6).
-- KEYS[1] queue, KEYS[2] timeouts; ARGV[1] owner field, ARGV[2] wait in ms it was queued with
leave_queue(KEYS[1], KEYS[2], ARGV[1], tonumber(ARGV[2]))
return nil
