//! Java interop: rlock and an emulated Redisson client (`rlock_tests::redisson`, written from
//! docs/protocol.md) share locks on one Redis.
//!
//! Every scenario is written once over [`support::Party`] and instantiated in both directions
//! (`…::java_to_rlock` / `…::rlock_to_java`: which side plays the scenario's first role), and every
//! test checks what Redis shows (hash fields and counts, PTTLs, channels, messages, latch keys) or
//! what the clock shows (wake-ups within [`support::WAKE_LIMIT`] of the release).
//!
//! The scenarios every lock kind shares are also written once over a [`support::InteropKind`] and
//! run for each kind of `rlock_tests::lock_kinds!` (`…::<kind>::…`, e.g.
//! `wakeup::unlock_wakes_the_waiter::lock::java_to_rlock`);
//! the others are about one kind (most about the reentrant lock, `RLock`, some also run for its
//! non-reentrant twin).
//!
//! Modules, one behaviour each. For every kind:
//! - [`exclusion`]: mutual exclusion under mixed contention (a non-atomic counter stays exact), for
//!   every kind whose holders exclude each other (not the read lock);
//! - [`wakeup`]: unlock and force-unlock wake the other side at once despite a 30 s PTTL (a
//!   spin-lock poller within one back-off delay);
//! - [`reentrancy`]: both sides' holds on one name over time, partial unlocks re-applying leases
//!   (for the kinds that re-enter), and unlocks by a non-owner refused on both sides.
//!
//! For one kind each:
//! - [`fair`]: FIFO order across the sides, give-ups that leave the queue (also for the
//!   non-reentrant fair lock, and both fair kinds in one queue);
//! - [`non_reentrant`]: for both non-reentrant locks, re-entries refused on both sides by every
//!   acquisition form, changing nothing and never queueing; the lock and its reentrant twin as
//!   one lock, across the sides and within a client;
//! - [`rw`]: readers of both sides share, writers are kept out, `0` and `1` wake across the sides;
//! - [`fenced`]: tokens strictly increase across the sides, and both read the same latest one;
//! - [`spin`]: a poller notices the other side's silent unlock within one back-off delay.
//!
//! For the `RLock` (and, where its test names have a `non_reentrant` twin, the non-reentrant lock,
//! which shares its hash, channel, messages and watchdog):
//! - [`watchdog`]: renewal keeps the other side out past the lease (two tests take ~35 s), and a
//!   holder notices a foreign force-unlock;
//! - [`lease`]: leases expire silently and hand the lock over at the PTTL;
//! - [`latch`]: the unlock latch (replays, lifetime, stale latches);
//! - [`names`]: odd names, and the channel / key / latch names byte for byte;
//! - [`messages`]: raw messages (`0`, `1`, garbage) and subscriber reconnects;
//! - [`versions`]: one handshake per emulated Redisson version;
//! - [`differences`]: the known differences, pinned down;
//! - [`local_hand_off`]: rlock's tasks hand the lock to each other in bounded streaks, and a
//!   Java waiter still gets its turn; a Java unlock wakes rlock's queue head, which hands on in
//!   queue order;
//! - [`entries`]: the objects of map entries (`getMap(n).getLock(key)` and its kin): names for every
//!   codec, key type and container, and for every kind Java hands out per entry, wake-ups (also
//!   in a cluster), leases and watchdogs both ways, the entry's synchronizers, a Java
//!   transaction's hold;
//! - [`group`]: the group lock (Redisson's faster multi-lock, `getMultiLock(group, values)`):
//!   unlocks wake the other side (in a cluster too: the matrix), and a counter stays exact under
//!   mixed contention;
//! - [`cluster`]: the same in a Redis Cluster, with sharded pub/sub as Redisson picks it (and, for
//!   every kind, wake-ups both ways; the rest of the kind × direction × topology matrix is the
//!   ignored `…::cluster::…` tests, run by `scripts/interop-matrix.sh`);
//! - [`wire`]: the exact commands each side's scripts run (MONITOR), against literal traces;
//!   [`golden`] does the same for the other kinds.
//!
//! The synchronizers, over their own parties ([`support::synchronizers`]):
//! - [`semaphores`]: for both semaphores, permits shared exactly under mixed contention (the
//!   history checker's counting model), releases waking the other side (also in a cluster), `n`
//!   permits waking `n` waiters;
//! - [`expirable`]: the permit-expirable semaphore's expired permits reclaimed by the other side,
//!   ids and leases across the sides;
//! - [`count_down`]: the count-down latch opened, closed and deleted across the sides;
//! - [`golden_synchronizers`]: the exact commands (and, where docs/protocol.md fixes them, the keys
//!   and arguments) of every synchronizer script, against literal traces.
//!
//! Wake-up latencies are printed on stderr (`cargo test --test interop -- --nocapture`), as lines
//! starting with `interop timing:`; the semaphores' contention figures as `interop permits:`.

mod support;

mod cluster;
mod count_down;
mod differences;
mod entries;
mod exclusion;
mod expirable;
mod fair;
mod fenced;
mod golden;
mod golden_synchronizers;
mod group;
mod latch;
mod lease;
mod local_hand_off;
mod messages;
mod names;
mod non_reentrant;
mod reentrancy;
mod rw;
mod semaphores;
mod spin;
mod versions;
mod wakeup;
mod watchdog;
mod wire;
