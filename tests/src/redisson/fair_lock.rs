//! The `RFairLock` (docs/protocol.md §6): its scripts, [`JavaClient::get_fair_lock`] and the
//! [`JavaFairLock`] object it returns. Its holds are the `RLock`'s (renewed alike, §4); waiters
//! queue in a list with deadlines in a sorted set, and each waits on a channel of its own.

use std::time::Duration;

use redis::{AsyncCommands, RedisResult};

use super::kind::{JavaObject, MissingUnlock, ObjectKind, RlockObject};
use super::lock::UNLOCK_DECREMENT;
use super::{
    Attempt, Hold, JavaClient, LockObject, RedissonVersion, ThreadId, acquire_calls,
    base_lock_calls, lock_channel, millis, prefix_name,
};
use crate::harness::epoch_ms;

/// The unlock message, published to the queue head's channel only (§6.2).
const UNLOCK_MESSAGE: &str = "0";

// ===== scripts (paraphrased from the numbered steps of docs/protocol.md) =====
//
// Every script but the give-up has KEYS[1] = lock, KEYS[2] = queue, KEYS[3] = timeouts, and
// declares the Lua locals its fragments use.

/// §6.3, the stale purge, over the Lua local `now`: the loop up to its stop test, which
/// [`purge`] completes.
const PURGE_START: &str = r"
while true do
    local head = redis.call('lindex', KEYS[2], 0);
    if (head == false) then
        break;
    end;
    local deadline = tonumber(redis.call('zscore', KEYS[3], head));
";
/// 3.31+: a head without a score stops the purge.
const PURGE_STOP: &str = r"
    if (deadline == nil) or (deadline > now) then
        break;
    end;
";
/// ≤3.30: no guard; a head without a score fails the script (comparing nil).
const PURGE_STOP_UNGUARDED: &str = r"
    if (deadline > now) then
        break;
    end;
";
const PURGE_END: &str = r"
    redis.call('zrem', KEYS[3], head);
    redis.call('lpop', KEYS[2]);
end;
";

/// §6.4 step 2, over the Lua locals `lease`, `owner` and `wait`: a free lock goes to the head of
/// the queue (or anyone, when nobody queues), which leaves the queue, and every other waiter's
/// deadline moves `wait` closer. Replies nil. Step 3 (a holder) follows: see [`Reentry`].
const HOLD_FREE: &str = r"
if (redis.call('exists', KEYS[1]) == 0)
    and ((redis.call('exists', KEYS[2]) == 0) or (redis.call('lindex', KEYS[2], 0) == owner)) then
    redis.call('lpop', KEYS[2]);
    redis.call('zrem', KEYS[3], owner);
    local waiters = redis.call('zrange', KEYS[3], 0, -1);
    for i = 1, #waiters do
        redis.call('zincrby', KEYS[3], -tonumber(wait), waiters[i]);
    end;
    redis.call('hset', KEYS[1], owner, 1);
    redis.call('pexpire', KEYS[1], lease);
    return nil;
end;
";

/// §6.4 step 3 (after `HOLD_FREE`): a holder re-enters. Replies nil.
const REENTER: &str = r"
if (redis.call('hexists', KEYS[1], owner) == 1) then
    redis.call('hincrby', KEYS[1], owner, 1);
    redis.call('pexpire', KEYS[1], lease);
    return nil;
end;
";

/// What both acquire forms do for a caller that holds the lock already (§6.4 step 3, a Lua block
/// after `HOLD_FREE`), and the arguments that takes after the form's own: the fair lock re-enters
/// ([`REENTERS`]); the non-reentrant fair lock refuses (§6.9).
#[derive(Clone, Copy, Debug)]
pub(super) struct Reentry {
    pub(super) lua: &'static str,
    pub(super) extra: &'static [&'static str],
}

/// The fair lock's step 3: a holder re-enters.
const REENTERS: Reentry = Reentry {
    lua: REENTER,
    extra: &[],
};

/// §6.4: KEYS = [lock, queue, timeouts]; ARGV = [lease, lockName, wait, now].
const WAITING_LOCALS: &str = r"
local lease, owner, wait, now = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]);
";

/// §6.4 step 4, an already queued waiter: its reply follows (see [`acquire_script`]).
const QUEUED: &str = r"
local queued = redis.call('zscore', KEYS[3], owner);
if (queued ~= false) then
";
/// 3.32+: `max(0, PTTL)`; 0 while the lock is free but someone else heads the queue.
const QUEUED_PTTL: &str = r"
    return math.max(0, redis.call('pttl', KEYS[1]));
end;
";
/// ≤3.31: the deadline less `wait` and `now`.
const QUEUED_DEADLINE: &str = r"
    return tonumber(queued) - tonumber(wait) - now;
end;
";

/// §6.4 step 5, enqueueing: the ttl is the time left to the last waiter's deadline (see
/// [`acquire_script`] for that part), else the lock's PTTL.
const ENQUEUE_START: &str = r"
local last = redis.call('lindex', KEYS[2], -1);
local ttl;
";
/// 3.45+: a last waiter without a score counts as none.
const PREDECESSOR: &str = r"
local score = false;
if (last ~= false) and (last ~= owner) then
    score = redis.call('zscore', KEYS[3], last);
end;
if (score ~= false) then
    ttl = tonumber(score) - now;
else
    ttl = redis.call('pttl', KEYS[1]);
end;
";
/// ≤3.44: no guard; a last waiter without a score fails the script (arithmetic on nil).
const PREDECESSOR_UNGUARDED: &str = r"
if (last ~= false) and (last ~= owner) then
    ttl = tonumber(redis.call('zscore', KEYS[3], last)) - now;
else
    ttl = redis.call('pttl', KEYS[1]);
end;
";
/// The deadline is `ttl + wait + now`; only a new waiter joins the queue. Replies the ttl.
const ENQUEUE_END: &str = r"
local deadline = ttl + tonumber(wait) + now;
if (redis.call('zadd', KEYS[3], deadline, owner) == 1) then
    redis.call('rpush', KEYS[2], owner);
end;
return ttl;
";

/// §6.5: KEYS = [lock, queue, timeouts]; ARGV = [lease, lockName, now, wait] (`now` and `wait`
/// swapped against §6.4). Purge, then `HOLD_FREE` and the re-entry; otherwise 1, never queueing.
const NON_WAITING_LOCALS: &str = r"
local lease, owner, now, wait = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4];
";
const NOT_ACQUIRED: &str = r"
return 1;
";

/// A Lua function: publish the message (`ARGV[1]`) to the queue head's channel, `KEYS[4]` (the
/// lock channel) plus `:` and the head's lockName, if anyone queues (§6.7, §6.8).
const WAKE_HEAD: &str = r"
local function wake_head()
    local head = redis.call('lindex', KEYS[2], 0);
    if (head ~= false) then
        publish(KEYS[4] .. ':' .. head, ARGV[1]);
    end;
end;
";

/// §6.7 (run by `Wire::release`, with `WAKE_HEAD` and the purge): KEYS = [lock, queue, timeouts,
/// channel]; ARGV = [0, lease, lockName, now]. A missing lock wakes the head and replies 1; else the
/// `RLock`'s decrement, and the release deletes, latches 1 and then wakes the head.
const UNLOCK_LOCALS: &str = r"
local lock, owner, lease, now = KEYS[1], ARGV[3], ARGV[2], tonumber(ARGV[4]);
";
const UNLOCK_MISSING: &str = r"
if (redis.call('exists', lock) == 0) then
    wake_head();
    latched(1);
    return 1;
end;
";
const UNLOCK_RELEASE: &str = r"
redis.call('del', lock);
latched(1);
wake_head();
return 1;
";

/// §6.8 (with `WAKE_HEAD` and the purge): KEYS = [lock, queue, timeouts, channel];
/// ARGV = [0, now]. 1 when the lock existed (deleted, head woken), else 0.
const FORCE_UNLOCK_LOCALS: &str = r"
local now = tonumber(ARGV[2]);
";
const FORCE_UNLOCK: &str = r"
if (redis.call('del', KEYS[1]) == 1) then
    wake_head();
    return 1;
end;
return 0;
";

/// §6.6: KEYS = [queue, timeouts]; ARGV = [lockName, wait]. Every waiter behind `lockName` moves
/// its deadline `wait` closer; `lockName` leaves the set and the queue.
const GIVE_UP: &str = r"
local queue = redis.call('lrange', KEYS[1], 0, -1);
local found = false;
for i = 1, #queue do
    if found then
        redis.call('zincrby', KEYS[2], -tonumber(ARGV[2]), queue[i]);
    elseif (queue[i] == ARGV[1]) then
        found = true;
    end;
end;
redis.call('zrem', KEYS[2], ARGV[1]);
redis.call('lrem', KEYS[1], 0, ARGV[1]);
";

/// The stale purge of `version` (§6.3).
fn purge(version: RedissonVersion) -> String {
    let stop = if version >= RedissonVersion::V3_31 {
        PURGE_STOP
    } else {
        PURGE_STOP_UNGUARDED
    };
    [PURGE_START, stop, PURGE_END].concat()
}

/// The waiting acquire of `version` (§6.4) with step 3 `reentry`: ≤3.31 replies `zscore − wait −
/// now` to a queued waiter (3.32+: `max(0, pttl)`); ≤3.44 enqueues behind a last waiter without
/// checking its score.
fn acquire_script(version: RedissonVersion, reentry: &str) -> String {
    let queued = if version >= RedissonVersion::V3_44 {
        QUEUED_PTTL
    } else {
        QUEUED_DEADLINE
    };
    let predecessor = if version >= RedissonVersion::V3_44 {
        PREDECESSOR
    } else {
        PREDECESSOR_UNGUARDED
    };
    [
        WAITING_LOCALS,
        &purge(version),
        HOLD_FREE,
        reentry,
        QUEUED,
        queued,
        ENQUEUE_START,
        predecessor,
        ENQUEUE_END,
    ]
    .concat()
}

// ===== the client's RFairLock =====

impl JavaClient {
    /// `redisson.getFairLock(name)`: a new `RFairLock` object (with its own
    /// `internalLockLeaseTime`).
    pub fn get_fair_lock(&self, name: impl Into<String>) -> JavaFairLock {
        self.fair_lock_with(name.into(), REENTERS)
    }

    /// A new fair lock object `name` whose acquires treat a holder by `reentry`.
    pub(super) fn fair_lock_with(&self, name: String, reentry: Reentry) -> JavaFairLock {
        JavaFairLock {
            queue: prefix_name("redisson_lock_queue", &name),
            timeouts: prefix_name("redisson_lock_timeout", &name),
            channel: lock_channel(&name),
            object: LockObject::new(self, name, Hold::Lock),
            reentry,
        }
    }
}

// ===== the kind =====

/// The fair lock: `RFairLock` (`getFairLock`), rlock's `FairLock`.
#[derive(Clone, Copy, Debug)]
pub struct FairKind;

impl ObjectKind for FairKind {
    fn interface(&self) -> &'static str {
        "RFairLock"
    }

    fn described_as(&self) -> &'static str {
        "fair lock"
    }

    fn entry_suffix(&self) -> Option<&'static str> {
        Some("fairlock")
    }

    /// Each waiter's own: the lock's channel with its owner field appended (§6.2).
    fn channel(&self, name: &str, owner: &str) -> Option<String> {
        Some(format!("{}:{owner}", lock_channel(name)))
    }

    /// None: an unlock wakes the queue head only (§6.7).
    fn release_message(&self, _name: &str) -> Option<(String, &'static str)> {
        None
    }

    /// A success (§6.7 step 3: it would wake a queue head, and there is none).
    fn missing_unlock(&self) -> MissingUnlock {
        MissingUnlock::Released
    }

    fn java(&self, client: &JavaClient, name: &str) -> JavaObject {
        JavaObject::Fair(client.get_fair_lock(name))
    }

    fn rlock(&self, client: &rlock_redisson::Client, name: &str) -> RlockObject {
        RlockObject::Fair(client.fair_lock(name))
    }
}

/// An emulated `RFairLock` object (§6): the `RLock`'s hash, plus the FIFO queue
/// `redisson_lock_queue:{N}` of waiting lockNames and their deadlines (epoch ms, the client's
/// clock) in the sorted set `redisson_lock_timeout:{N}`. Each waiting thread listens on
/// `redisson_lock__channel:{N}:<uuid>:<tid>`; unlocks wake the queue head only. `lock` queues
/// with `wait` = `fairLockWaitTimeout` and stays queued until it acquires; `try_lock_for` queues
/// with its wait time (or that timeout when zero) and gives up its place when it runs out (§6.6);
/// `try_lock` uses the non-waiting script (§6.5), which never queues. Clones share the object.
#[derive(Clone, Debug)]
pub struct JavaFairLock {
    object: LockObject,
    queue: String,
    timeouts: String,
    /// The base of the waiters' channels.
    channel: String,
    reentry: Reentry,
}

impl JavaFairLock {
    base_lock_calls!(object; exists);
    acquire_calls!();

    /// The queue's key: `redisson_lock_queue:{N}`.
    pub fn queue_name(&self) -> &str {
        &self.queue
    }

    /// The deadlines' key: `redisson_lock_timeout:{N}`.
    pub fn timeout_name(&self) -> &str {
        &self.timeouts
    }

    /// The channel `thread` waits on: `redisson_lock__channel:{N}:<uuid>:<tid>` (§6.2).
    pub fn thread_channel(&self, thread: ThreadId) -> String {
        format!("{}:{}", self.channel, self.object.field(thread))
    }

    /// The queue, head first (`LRANGE`).
    ///
    /// # Errors
    ///
    /// When Redis fails.
    pub async fn queue(&self) -> RedisResult<Vec<String>> {
        self.object
            .wire()
            .conn
            .clone()
            .lrange(&self.queue, 0, -1)
            .await
    }

    /// The waiters' deadlines in epoch ms, earliest first (`ZRANGE … WITHSCORES`).
    ///
    /// # Errors
    ///
    /// When Redis fails.
    pub async fn timeouts(&self) -> RedisResult<Vec<(String, i64)>> {
        let mut conn = self.object.wire().conn.clone();
        conn.zrange_withscores(&self.timeouts, 0, -1).await
    }

    /// `unlock()` on `thread` (§6.7), with the client side of §2.3. Returns the script's reply:
    /// `Some(1)` released (the queue head woken), `Some(0)` still held, `None` not the owner. A
    /// lock that no longer exists unlocks with `Some(1)` and wakes the head too.
    ///
    /// # Errors
    ///
    /// When the script fails.
    pub async fn unlock(&self, thread: ThreadId) -> RedisResult<Option<i64>> {
        let attempt = |id: String| async move { self.unlock_attempt(thread, &id).await };
        self.object.unlock(thread, attempt).await
    }

    /// `forceUnlock()` (§6.8): stops renewal, purges stale waiters, deletes the lock whoever holds
    /// it and, if it existed, wakes the queue head. Returns whether it existed.
    ///
    /// # Errors
    ///
    /// When the script fails.
    pub async fn force_unlock(&self) -> RedisResult<bool> {
        let version = self.object.wire().version;
        let body = [
            FORCE_UNLOCK_LOCALS,
            WAKE_HEAD,
            &purge(version),
            FORCE_UNLOCK,
        ]
        .concat();
        let args = vec![UNLOCK_MESSAGE.to_owned(), epoch_ms().to_string()];
        let keys = self.release_keys();
        self.object.force_unlock_script(&body, &keys, args).await
    }

    /// `fairLockWaitTimeout` in ms.
    fn default_wait_ms(&self) -> u64 {
        millis(self.object.client.config.fair_lock_wait_timeout)
    }

    /// The local entry of `thread`'s waiting: `<uuid>:<N>:<tid>` (§6.2).
    fn entry_name(&self, thread: ThreadId) -> String {
        format!("{}:{thread}", self.object.entry_name())
    }

    fn acquire_keys(&self) -> [&str; 3] {
        [&self.object.name, &self.queue, &self.timeouts]
    }

    fn release_keys(&self) -> [&str; 4] {
        [
            &self.object.name,
            &self.queue,
            &self.timeouts,
            &self.channel,
        ]
    }

    /// `lock(leaseTime)` (§3.3 on the thread's own entry and channel), with `wait` =
    /// `fairLockWaitTimeout`: queues, and stays queued until it acquires.
    async fn lock_inner(&self, thread: ThreadId, lease: Option<Duration>) -> RedisResult<()> {
        let wait_ms = self.default_wait_ms();
        let (entry, channel) = (self.entry_name(thread), self.thread_channel(thread));
        let attempt = || self.try_acquire(thread, lease, wait_ms);
        self.object.lock_waiting(&entry, &channel, attempt).await
    }

    /// `tryLock()`: one attempt with the non-waiting script (§6.5, `now` and `wait` swapped),
    /// which never queues.
    async fn try_lock_once(&self, thread: ThreadId) -> RedisResult<bool> {
        let object = &self.object;
        let version = object.wire().version;
        let reentry = self.reentry.lua;
        let script = [
            NON_WAITING_LOCALS,
            &purge(version),
            HOLD_FREE,
            reentry,
            NOT_ACQUIRED,
        ]
        .concat();
        let extra = self.with_reentry([epoch_ms().to_string(), self.default_wait_ms().to_string()]);
        let keys = self.acquire_keys();
        let attempt = object.acquire(thread, None, &script, &keys, &extra, Option::into);
        Ok(attempt.await?.is_acquired())
    }

    /// `tryLock(waitTime, leaseTime)` (§3.4 on the thread's own entry and channel), with `wait` =
    /// the wait time, or `fairLockWaitTimeout` when it is zero: queues and, on running out, gives
    /// up its place (§6.6).
    async fn try_lock_inner(
        &self,
        thread: ThreadId,
        wait: Duration,
        lease: Option<Duration>,
    ) -> RedisResult<bool> {
        let wait_ms = match millis(wait) {
            0 => self.default_wait_ms(),
            wait_ms => wait_ms,
        };
        let (entry, channel) = (self.entry_name(thread), self.thread_channel(thread));
        let attempt = || self.try_acquire(thread, lease, wait_ms);
        let held = self
            .object
            .try_lock_waiting(&entry, &channel, wait, attempt)
            .await?;
        if held.is_none() {
            self.give_up(thread, wait_ms).await?;
        }
        Ok(held.is_some())
    }

    /// One waiting acquire (§6.4) with `wait_ms` and the clock now.
    async fn try_acquire(
        &self,
        thread: ThreadId,
        lease: Option<Duration>,
        wait_ms: u64,
    ) -> RedisResult<Attempt<()>> {
        let object = &self.object;
        let script = acquire_script(object.wire().version, self.reentry.lua);
        let extra = self.with_reentry([wait_ms.to_string(), epoch_ms().to_string()]);
        object
            .acquire(
                thread,
                lease,
                &script,
                &self.acquire_keys(),
                &extra,
                Option::into,
            )
            .await
    }

    /// An acquire form's arguments after `[lease, lockName]`: its own, then the re-entry's.
    fn with_reentry(&self, form: [String; 2]) -> Vec<String> {
        let reentry = self.reentry.extra.iter().map(|&arg| arg.to_owned());
        form.into_iter().chain(reentry).collect()
    }

    /// `acquireFailed` (§6.6): `thread` leaves the queue.
    async fn give_up(&self, thread: ThreadId, wait_ms: u64) -> RedisResult<()> {
        let keys = [self.queue.as_str(), self.timeouts.as_str()];
        let args = [self.object.field(thread), wait_ms.to_string()];
        self.object.wire().eval(GIVE_UP, &keys, &args).await
    }

    /// One unlock script call under `request_id` (§6.7).
    async fn unlock_attempt(&self, thread: ThreadId, request_id: &str) -> RedisResult<Option<i64>> {
        let object = &self.object;
        let version = object.wire().version;
        let body = [
            UNLOCK_LOCALS,
            WAKE_HEAD,
            &purge(version),
            UNLOCK_MISSING,
            UNLOCK_DECREMENT,
            UNLOCK_RELEASE,
        ]
        .concat();
        let args = vec![
            UNLOCK_MESSAGE.to_owned(),
            object.internal_lease_ms().to_string(),
            object.field(thread),
            epoch_ms().to_string(),
        ];
        let keys = self.release_keys();
        object
            .unlock_script(request_id, &body, &keys, args, true)
            .await
    }
}

#[cfg(test)]
mod tests {
    use redis::AsyncCommands;

    use super::*;
    use crate::RedisServer;
    use crate::harness::raw;
    use crate::redisson::RedissonVersion;
    use crate::redisson::testing::{Listener, eventually, finished, java};

    /// Waits until the queue is `expected` (lockNames, head first).
    async fn queue_is(lock: &JavaFairLock, expected: &[&str]) {
        eventually(|| async { lock.queue().await.expect("LRANGE") == expected }).await;
    }

    /// `thread`'s deadline.
    async fn deadline(lock: &JavaFairLock, thread: ThreadId) -> Option<i64> {
        let field = lock.lock_name(thread);
        let timeouts = lock.timeouts().await.expect("ZRANGE");
        timeouts
            .into_iter()
            .find(|(f, _)| *f == field)
            .map(|(_, d)| d)
    }

    /// A waiting acquire's ttl (it must not acquire).
    async fn busy_ttl(lock: &JavaFairLock, thread: ThreadId, wait_ms: u64) -> RedisResult<i64> {
        match lock.try_acquire(thread, None, wait_ms).await? {
            Attempt::Busy(ttl) => Ok(ttl),
            Attempt::Acquired(()) => panic!("thread {thread} acquired"),
        }
    }

    /// Waiters queue in arrival order with deadlines `wait` apart; an unlock wakes the head on its
    /// own channel, which leaves the queue and moves the others' deadlines `wait` closer (§6.4).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn waiters_queue_in_order_and_the_head_is_woken() {
        let server = RedisServer::start();
        let java = java(&server, RedissonVersion::V4).await;
        let lock = java.get_fair_lock("fair:order");
        assert_eq!(lock.queue_name(), "redisson_lock_queue:{fair:order}");
        assert_eq!(lock.timeout_name(), "redisson_lock_timeout:{fair:order}");
        let channel = format!("redisson_lock__channel:{{fair:order}}:{}:2", java.id());
        assert_eq!(lock.thread_channel(2), channel);
        let (f2, f3) = (lock.lock_name(2), lock.lock_name(3));
        lock.lock(1).await.expect("lock");
        let mut listener = Listener::start(&server).await;
        let second = tokio::spawn({
            let lock = lock.clone();
            async move { lock.lock(2).await }
        });
        queue_is(&lock, &[&f2]).await;
        let third = tokio::spawn({
            let lock = lock.clone();
            async move { lock.lock(3).await }
        });
        queue_is(&lock, &[&f2, &f3]).await;

        let wait = 300_000;
        let d2 = deadline(&lock, 2).await.expect("deadline of 2");
        assert_eq!(
            deadline(&lock, 3).await,
            Some(d2 + wait),
            "behind its predecessor"
        );
        let lead = d2 - i64::try_from(epoch_ms()).expect("epoch ms") - wait;
        assert!(
            (29_000..=30_000).contains(&lead),
            "the holder's PTTL ahead: {lead}"
        );

        assert_eq!(lock.unlock(1).await.expect("unlock"), Some(1));
        assert_eq!(listener.next().await, (lock.thread_channel(2), "0".into()));
        finished(second).await.expect("2 acquires");
        assert_eq!(lock.hold_count(2).await.expect("HGET"), 1);
        assert_eq!(lock.queue().await.expect("LRANGE"), [f3]);
        assert_eq!(deadline(&lock, 3).await, Some(d2), "moved up by wait");

        assert_eq!(lock.unlock(2).await.expect("unlock"), Some(1));
        assert_eq!(listener.next().await, (lock.thread_channel(3), "0".into()));
        finished(third).await.expect("3 acquires");
        assert!(lock.queue().await.expect("LRANGE").is_empty());
        assert!(lock.timeouts().await.expect("ZRANGE").is_empty());
        assert_eq!(lock.unlock(3).await.expect("unlock"), Some(1));
        listener.assert_quiet().await; // nobody left to wake
    }

    /// A `tryLock(wait)` that runs out gives up its place (§6.6): it leaves the queue and the
    /// deadlines, and those behind it move `wait` closer. `tryLock()` never queues (§6.5).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_waiter_that_runs_out_gives_up_its_place() {
        let server = RedisServer::start();
        let java = java(&server, RedissonVersion::V4).await;
        let lock = java.get_fair_lock("fair:give-up");
        let (f2, f3, f4) = (lock.lock_name(2), lock.lock_name(3), lock.lock_name(4));
        lock.lock(1).await.expect("lock");
        assert!(!lock.try_lock(5).await.expect("tryLock()"));
        assert!(lock.queue().await.expect("LRANGE").is_empty());

        let spawn_lock = |thread| {
            let lock = lock.clone();
            tokio::spawn(async move { lock.lock(thread).await })
        };
        let _second = spawn_lock(2);
        queue_is(&lock, &[&f2]).await;
        let wait = Duration::from_millis(500);
        let third = tokio::spawn({
            let lock = lock.clone();
            async move { lock.try_lock_for(3, wait, None).await }
        });
        queue_is(&lock, &[&f2, &f3]).await;
        let d3 = deadline(&lock, 3).await.expect("deadline of 3");
        assert_eq!(deadline(&lock, 2).await.map(|d2| d2 + 500), Some(d3));
        let _fourth = spawn_lock(4);
        queue_is(&lock, &[&f2, &f3, &f4]).await;
        let d4 = deadline(&lock, 4).await.expect("deadline of 4");

        assert!(!finished(third).await.expect("tryLock(wait)"));
        assert_eq!(lock.queue().await.expect("LRANGE"), [f2, f4]);
        assert_eq!(deadline(&lock, 3).await, None);
        assert_eq!(deadline(&lock, 4).await, Some(d4 - 500));
    }

    /// Unlocking a lock that is gone succeeds and wakes the head; force unlock wakes it too
    /// (§6.7, §6.8).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn unlocks_wake_the_head_even_of_a_missing_lock() {
        let server = RedisServer::start();
        let mut redis = raw(&server).await;
        let java = java(&server, RedissonVersion::V4).await;
        let lock = java.get_fair_lock("fair:missing");
        lock.lock(1).await.expect("lock");
        busy_ttl(&lock, 2, 1000).await.expect("2 queues");
        let mut listener = Listener::start(&server).await;

        assert!(lock.force_unlock().await.expect("forceUnlock"));
        assert_eq!(listener.next().await, (lock.thread_channel(2), "0".into()));
        assert!(!lock.force_unlock().await.expect("forceUnlock"));
        listener.assert_quiet().await;

        assert_eq!(lock.unlock(9).await.expect("unlock"), Some(1));
        assert_eq!(listener.next().await, (lock.thread_channel(2), "0".into()));
        let latches: Vec<String> = redis.keys("redisson_unlock_latch:*").await.expect("KEYS");
        assert!(
            latches.is_empty(),
            "the client deletes its latch: {latches:?}"
        );
    }

    /// The version table of §6 (Appendix A): a queued waiter's reply while someone else heads the
    /// queue of a free lock (3.32+: 0; ≤3.31: its deadline less wait and now), and a queue member
    /// without a score (≤3.30 fails the purge, ≤3.44 the enqueue behind it).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn queued_replies_and_guards_follow_the_version() {
        let server = RedisServer::start();
        let mut redis = raw(&server).await;
        for (version, queued_ttl) in [
            (RedissonVersion::V3_31, 29_000..=31_000),
            (RedissonVersion::V3_44, 0..=0),
            (RedissonVersion::V4, 0..=0),
        ] {
            let java = java(&server, version).await;
            let lock = java.get_fair_lock(format!("fair:{version:?}"));
            lock.lock(1).await.expect("lock");
            busy_ttl(&lock, 2, 1000).await.expect("2 queues");
            busy_ttl(&lock, 3, 1000).await.expect("3 queues");
            let _: i64 = redis.del(lock.name()).await.expect("DEL");
            let ttl = busy_ttl(&lock, 3, 1000).await.expect("3 polls");
            assert!(queued_ttl.contains(&ttl), "{version:?}: {ttl}");

            let f3 = lock.lock_name(3);
            let _: i64 = redis.zrem(lock.timeout_name(), &f3).await.expect("ZREM");
            let enqueued = busy_ttl(&lock, 4, 1000).await;
            assert_eq!(
                enqueued.is_ok(),
                version >= RedissonVersion::V3_44,
                "{version:?}"
            );
        }
        let java = java(&server, RedissonVersion::V3_23).await;
        let lock = java.get_fair_lock("fair:unguarded-purge");
        let _: i64 = redis
            .rpush(lock.queue_name(), "ghost")
            .await
            .expect("RPUSH");
        assert!(
            lock.try_lock(1).await.is_err(),
            "≤3.30 compares a nil score"
        );
    }
}
