//! A fleet of worker processes (the `rlock-torture` binary) contending for locks, with the hooks a
//! fault-injection test needs: see who holds what, kill or freeze a worker, record faults, and at the
//! end collect every history, check it and look for holds left behind in Redis.
//!
//! Workers are told to exit by closing their standard input, so a test that dies takes its workers
//! with it.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use rlock_redisson::PermitId;
use tempfile::TempDir;

use super::checker::{History, Report};
use super::record::{Event, FaultKind, Record, now_ns, read_log};
use crate::redisson::{
    FairKind, FencedKind, NonReentrantKind, ObjectKind, ReentrantKind, SpinKind,
};

/// [`FleetKind`] of [`lock_kinds!`](crate::lock_kinds)' rows, and [`FleetKind::object`].
macro_rules! fleet_kinds {
    ($($name:ident: $variant:ident($object:path)),+ $(,)?) => {
        /// Which Redisson lock object a worker contends for (its `--kind`), and how its history
        /// shows it: a lock of one of the kinds, each through its own object (`client.lock(name)`,
        /// `client.fair_lock(name)`, ...: [`FleetKind::object`]), or a mix of them. The fair kinds'
        /// waiters also log when they are seen queued, for the FIFO check; the spin lock's poll and
        /// nothing is published; a fenced hold's fence is its fencing token; read holds are logged
        /// as shared; the non-reentrant kinds refuse re-entries (workers never re-enter them: each
        /// attempt is a fresh owner).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
        pub enum FleetKind {
            $(
                #[doc = concat!("A lock of the kind `", stringify!($name), "`.")]
                $variant,
            )+
            /// Both sides of one read-write lock: each attempt takes the read or the write side at
            /// random.
            Rw,
            /// The kinds that share the lock's hash, mixed on one name: each attempt (and each
            /// re-entry) takes the lock, spin, fair, fenced or non-reentrant lock of its name at
            /// random (see [`HASH_SHARING`]). Every hold takes the `INCR` fence (a fenced lock's
            /// token is its own counter), and nobody logs being queued: barging kinds make the fair
            /// lock's queue no promise.
            Mixed,
        }

        impl FleetKind {
            /// The Redisson object a worker contends for, whose [`ObjectKind`] makes its rlock
            /// handle; `None` for [`FleetKind::Rw`] and [`FleetKind::Mixed`], which pick one at
            /// random for each attempt.
            pub fn object(self) -> Option<&'static dyn ObjectKind> {
                match self {
                    $(Self::$variant => Some(&$object),)+
                    Self::Rw | Self::Mixed => None,
                }
            }
        }
    };
}

crate::lock_kinds!(all fleet_kinds);

impl Default for FleetKind {
    fn default() -> Self {
        Self::Lock
    }
}

/// The kinds whose holds live in the one hash of a lock name, and exclude each other there: the
/// reentrant, spin, fair, fenced and non-reentrant lock (rlock's and Redisson's alike).
pub const HASH_SHARING: [&dyn ObjectKind; 5] = [
    &ReentrantKind,
    &SpinKind,
    &FairKind,
    &FencedKind,
    &NonReentrantKind,
];

/// [`HASH_SHARING`] as an emulated Redisson client mixes them: without the fair lock, whose unlock
/// of a lock that no longer exists succeeds in Redisson (docs/protocol.md §6.7), so a Java fair
/// holder whose lock was force-unlocked is never told, and its history could not be checked for
/// overlaps outside signalled lease loss (rlock's fair unlock reports the lost hold).
pub const JAVA_HASH_SHARING: [&dyn ObjectKind; 4] =
    [&ReentrantKind, &SpinKind, &FencedKind, &NonReentrantKind];

impl FleetKind {
    /// The name on the command line.
    pub fn name(self) -> String {
        clap::ValueEnum::to_possible_value(&self)
            .expect("no kind is skipped")
            .get_name()
            .to_owned()
    }

    /// Whether its holds may exclude each other, so that attempts wait for holders (all but
    /// read-only workers).
    pub fn excludes(self) -> bool {
        self != Self::Read
    }

    /// Whether its waiters queue in Redis, in the fair lock's queue: a killed waiter blocks that
    /// queue until its deadline.
    pub fn queues(self) -> bool {
        matches!(self, Self::Fair | Self::NonReentrantFair)
    }
}

/// A synchronizer a worker contends for instead of a lock of its [`FleetKind`] (its `--synchronizer`).
/// Its attempts are logged like a lock's: a hold is permits taken, a latch seen open or every member
/// of a multi-lock taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Synchronizer {
    /// `client.semaphore(name)`: each attempt takes some of its permits (logged as an exclusive hold
    /// of that many permits), held until released: they have no lease.
    Semaphore,
    /// `client.permit_expirable_semaphore(name)`: as the semaphore, with permit ids and, given a
    /// lease, permits that come back by themselves when it runs out.
    Expirable,
    /// `client.count_down_latch(name)`: each attempt waits for the latch to open (logged as a read
    /// hold, shared by every waiter, taken when the wait returns); somebody else counts down.
    Latch,
    /// A `MultiLock` of the lock `name` on the fleet's Redis and the lock `name` on a second one
    /// ([`WorkerSpec::multi_url`]).
    Multi,
    /// `client.group_lock(name, ["a", "b", "c"])`: the group lock (Redisson's faster multi-lock)
    /// of three values of the group `name`, which every attempt takes all of, so that its holds
    /// exclude each other as a lock's.
    Group,
}

impl Synchronizer {
    /// The name on the command line.
    pub fn name(self) -> String {
        clap::ValueEnum::to_possible_value(&self)
            .expect("no synchronizer is skipped")
            .get_name()
            .to_owned()
    }

    /// Whether it counts permits: its names are checked for permits left taken, not for keys.
    pub fn counts_permits(self) -> bool {
        matches!(self, Self::Semaphore | Self::Expirable)
    }
}

/// How a worker behaves. [`WorkerSpec::new`] gives short, fast defaults for tests.
#[derive(Clone, Debug)]
pub struct WorkerSpec {
    /// Lock names, picked at random for each attempt.
    pub names: Vec<String>,
    /// Concurrent tasks in the process.
    pub tasks: u32,
    /// How long the worker keeps starting attempts.
    pub run_for: Duration,
    /// How long a hold lasts (±50 % jitter unless `steady_hold`).
    pub hold: Duration,
    /// Every hold lasts exactly `hold` (`--steady-hold`).
    pub steady_hold: bool,
    /// After each release of a lock's hold, the same owner makes one one-shot `try_lock()`, an
    /// attempt of its own (`--try-after-release`).
    pub try_after_release: bool,
    /// Pause between a task's attempts (±50 % jitter).
    pub think: Duration,
    /// The client's watchdog timeout.
    pub watchdog: Duration,
    /// The client's command timeout.
    pub command_timeout: Duration,
    /// The client's connection pool size.
    pub pool_size: usize,
    /// `None`: acquire with `lock()`; `Some(wait)`: with `try_lock_for(wait)`.
    pub wait: Option<Duration>,
    /// Percentage of attempts dropped after a random delay of up to `cancel_within`.
    pub cancel_percent: u8,
    /// The longest delay before a cancelled attempt is dropped.
    pub cancel_within: Duration,
    /// The lock kind.
    pub kind: FleetKind,
    /// The client's `fair_lock_wait_timeout`: how long a fair-lock waiter that stopped polling (its
    /// process was killed) blocks the queue before it is purged as stale.
    pub fair_wait_timeout: Duration,
    /// Whether the process's tasks hand exclusive locks to each other locally (rlock's default);
    /// `false` passes `--no-local-handoff`.
    pub local_handoff: bool,
    /// How long a streak of hand-offs may last (`None`: the client's default, 10 ms).
    pub local_handoff_window: Option<Duration>,
    /// Whether lock writes return only once a replica acknowledged them, in a replicated topology
    /// (`check_lock_synced_replicas`, on by default); `false` passes `--no-replica-acks`.
    pub replica_acks: bool,
    /// More `rlock-torture work` flags, e.g. the topology (`--topology cluster --nodes ...`).
    pub client_args: Vec<String>,
    /// Contend for this synchronizer instead of a lock of `kind`.
    pub synchronizer: Option<Synchronizer>,
    /// A semaphore's permits: every worker sets them up (`try_set_permits`, which only the first
    /// one does) and declares them to the checker.
    pub permits: u32,
    /// How many permits an attempt on a semaphore takes, picked at random in this range.
    pub take: RangeInclusive<u32>,
    /// The lease of the permits of an expirable semaphore (`None`: they do not expire), or of the
    /// holds of a lock (`None`: the watchdog's).
    pub lease: Option<Duration>,
    /// The second Redis of a multi-lock's members (its names are checked for leftovers there too).
    pub multi_url: Option<String>,
    /// Once it holds, an owner re-enters the lock up to this many times more, nested (a depth
    /// picked at random from 0), each re-entry an attempt of its own, released innermost first
    /// (`--reenter-max`).
    pub reenter_max: u32,
    /// Percentage of attempts made as two futures of one owner, run at once with `tokio::join!`
    /// (`--join-percent`).
    pub join_percent: u8,
    /// Percentage of an rlock worker's lock acquisitions taken with a short fixed lease rather than
    /// the watchdog's (`--lease-percent`; ignored by `java` workers, whose nested leases follow
    /// Redisson's rule that the latest lease wins).
    pub lease_percent: u8,
    /// Percentage of an rlock worker's re-entries released outer-first: the hold around the
    /// re-entry is released once the re-entry returned, and the re-entry holds on after it
    /// (`--outer-first-percent`; ignored by `java` workers).
    pub outer_first_percent: u8,
    /// Percentage of an rlock worker's first holds with a fixed lease kept past their lease, as a
    /// guard kept in a slot, and replaced: the owner acquires again and drops the old guard once
    /// that returned (`--replace-percent`; ignored by `java` workers).
    pub replace_percent: u8,
    /// Percentage of attempts after which the task force-unlocks one of its locks through its own
    /// client, by a kind picked among [`HASH_SHARING`] (`--force-unlock-percent`).
    pub force_unlock_percent: u8,
    /// The attempts are an emulated Redisson (Java) client's, of `kind`'s Java objects, each by a
    /// fresh Java thread (`--java`).
    pub java: bool,
    /// How often the client pings its subscriber connection (`ping_connection_interval`; `None`:
    /// the client's default, 30 s).
    pub ping_interval: Option<Duration>,
}

impl WorkerSpec {
    /// Three tasks contending for `names` of the reentrant lock for two seconds, 5 ms holds, a 1 s
    /// watchdog, local hand-off on (rlock's default); fair-lock waiters that die go stale after 5 s
    /// (rlock's default is 5 min).
    pub fn new(names: &[&str]) -> Self {
        Self {
            names: names.iter().map(|n| (*n).to_owned()).collect(),
            tasks: 3,
            run_for: Duration::from_secs(2),
            hold: Duration::from_millis(5),
            steady_hold: false,
            try_after_release: false,
            think: Duration::from_millis(2),
            watchdog: Duration::from_secs(1),
            command_timeout: Duration::from_millis(300),
            pool_size: 4,
            wait: None,
            cancel_percent: 0,
            cancel_within: Duration::from_millis(3),
            kind: FleetKind::Lock,
            fair_wait_timeout: Duration::from_secs(5),
            local_handoff: true,
            local_handoff_window: None,
            replica_acks: true,
            client_args: Vec::new(),
            synchronizer: None,
            permits: 1,
            take: 1..=1,
            lease: None,
            multi_url: None,
            reenter_max: 0,
            join_percent: 0,
            lease_percent: 0,
            outer_first_percent: 0,
            replace_percent: 0,
            force_unlock_percent: 0,
            java: false,
            ping_interval: None,
        }
    }

    fn args(&self) -> Vec<String> {
        let ms = |d: Duration| d.as_millis().to_string();
        let mut args = vec![
            "--names".to_owned(),
            self.names.join(","),
            "--tasks".to_owned(),
            self.tasks.to_string(),
            "--run-ms".to_owned(),
            ms(self.run_for),
            "--hold-ms".to_owned(),
            ms(self.hold),
            "--think-ms".to_owned(),
            ms(self.think),
            "--watchdog-ms".to_owned(),
            ms(self.watchdog),
            "--command-timeout-ms".to_owned(),
            ms(self.command_timeout),
            "--pool-size".to_owned(),
            self.pool_size.to_string(),
            "--cancel-percent".to_owned(),
            self.cancel_percent.to_string(),
            "--cancel-within-us".to_owned(),
            self.cancel_within.as_micros().to_string(),
            "--kind".to_owned(),
            self.kind.name(),
            "--fair-wait-timeout-ms".to_owned(),
            ms(self.fair_wait_timeout),
        ];
        if let Some(wait) = self.wait {
            args.extend(["--wait-ms".to_owned(), ms(wait)]);
        }
        if !self.local_handoff {
            args.push("--no-local-handoff".to_owned());
        }
        if let Some(window) = self.local_handoff_window {
            args.extend(["--local-handoff-window-ms".to_owned(), ms(window)]);
        }
        if self.steady_hold {
            args.push("--steady-hold".to_owned());
        }
        if self.try_after_release {
            args.push("--try-after-release".to_owned());
        }
        if let Some(lease) = self.lease {
            args.extend(["--lease-ms".to_owned(), ms(lease)]);
        }
        if !self.replica_acks {
            args.push("--no-replica-acks".to_owned());
        }
        if self.reenter_max > 0 {
            args.extend(["--reenter-max".to_owned(), self.reenter_max.to_string()]);
        }
        if self.join_percent > 0 {
            args.extend(["--join-percent".to_owned(), self.join_percent.to_string()]);
        }
        let rlock_only = [
            ("--lease-percent", self.lease_percent),
            ("--outer-first-percent", self.outer_first_percent),
            ("--replace-percent", self.replace_percent),
        ];
        for (flag, percent) in rlock_only {
            if percent > 0 && !self.java {
                args.extend([flag.to_owned(), percent.to_string()]);
            }
        }
        if self.force_unlock_percent > 0 {
            args.extend([
                "--force-unlock-percent".to_owned(),
                self.force_unlock_percent.to_string(),
            ]);
        }
        if self.java {
            args.push("--java".to_owned());
        }
        if let Some(interval) = self.ping_interval {
            args.extend(["--ping-interval-ms".to_owned(), ms(interval)]);
        }
        args.extend(self.client_args.iter().cloned());
        if let Some(synchronizer) = self.synchronizer {
            args.extend([
                "--synchronizer".to_owned(),
                synchronizer.name(),
                "--permits".to_owned(),
                self.permits.to_string(),
                "--take-min".to_owned(),
                self.take.start().to_string(),
                "--take-max".to_owned(),
                self.take.end().to_string(),
            ]);
            if let Some(url) = &self.multi_url {
                args.extend(["--multi-url".to_owned(), url.clone()]);
            }
        }
        args
    }
}

#[derive(Debug)]
struct Worker {
    name: String,
    log: PathBuf,
    child: Option<Child>,
    stdin: Option<ChildStdin>,
    killed: bool,
    /// When it should have logged `Finished` at the latest.
    finish_by: Instant,
}

/// Worker processes on one Redis, plus the faults injected into them.
#[derive(Debug)]
pub struct Fleet {
    binary: PathBuf,
    url: String,
    dir: TempDir,
    workers: Vec<Worker>,
    names: BTreeSet<String>,
    /// Other servers whose keys of `names` are checked for leftovers (a multi-lock's second one).
    other_urls: BTreeSet<String>,
    /// Semaphores, with their kind and permits: checked for permits left taken.
    counted: BTreeMap<String, (Synchronizer, u32)>,
    faults: Vec<Record>,
}

/// How long a worker may take past its run to let its last attempts finish.
const FINISH_GRACE: Duration = Duration::from_secs(30);

impl Fleet {
    /// A fleet of `binary` workers (`env!("CARGO_BIN_EXE_rlock-torture")`) on the Redis at `url`.
    pub fn new(binary: impl Into<PathBuf>, url: &str) -> Self {
        Self {
            binary: binary.into(),
            url: url.to_owned(),
            dir: tempfile::Builder::new()
                .prefix("rlock-fleet-")
                .tempdir()
                .expect("a temporary directory for the histories"),
            workers: Vec::new(),
            names: BTreeSet::new(),
            other_urls: BTreeSet::new(),
            counted: BTreeMap::new(),
            faults: Vec::new(),
        }
    }

    /// Looks for left-over holds on the Redis at `url` from now on: the promoted master after a
    /// failover.
    pub fn moved_to(&mut self, url: &str) {
        url.clone_into(&mut self.url);
    }

    /// Starts a worker; returns its index. Its process name in the history is `w<index>`.
    pub fn spawn(&mut self, spec: &WorkerSpec) -> usize {
        let url = self.url.clone();
        self.spawn_on(&url, spec)
    }

    /// Starts a worker on another Redis than the fleet's (only the fleet's is checked for leaks):
    /// a way to break mutual exclusion on purpose and see the checker catch it.
    pub fn spawn_on(&mut self, url: &str, spec: &WorkerSpec) -> usize {
        let index = self.workers.len();
        let name = format!("w{index}");
        let log = self.dir.path().join(format!("{name}.jsonl"));
        let mut child = Command::new(&self.binary)
            .arg("work")
            .args(["--url", url, "--process", &name])
            .arg("--log")
            .arg(&log)
            .args(spec.args())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", self.binary.display()));
        let stdin = child.stdin.take();
        match spec.synchronizer {
            Some(synchronizer) if synchronizer.counts_permits() => self.counted.extend(
                spec.names
                    .iter()
                    .map(|name| (name.clone(), (synchronizer, spec.permits))),
            ),
            _ => self.names.extend(spec.names.iter().cloned()),
        }
        self.other_urls.extend(spec.multi_url.iter().cloned());
        self.workers.push(Worker {
            name,
            log,
            child: Some(child),
            stdin,
            killed: false,
            finish_by: Instant::now() + spec.run_for + FINISH_GRACE,
        });
        index
    }

    /// The history name of worker `index`.
    pub fn name(&self, index: usize) -> &str {
        &self.workers[index].name
    }

    /// The records worker `index` has written so far.
    pub fn records(&self, index: usize) -> Vec<Record> {
        let log = &self.workers[index].log;
        if !log.exists() {
            return Vec::new();
        }
        read_log(log).unwrap_or_else(|e| panic!("history of {}: {e}", self.workers[index].name))
    }

    /// The lock worker `index` holds right now (as far as its history tells), if any.
    pub fn holding(&self, index: usize) -> Option<String> {
        holding(&self.records(index))
    }

    /// The lock worker `index` holds right now (as far as its history tells), if any, with its
    /// hold's hash field.
    pub fn held_field(&self, index: usize) -> Option<(String, String)> {
        open_hold(&self.records(index)).map(|(name, field)| (name.to_owned(), field.to_owned()))
    }

    /// Polls worker `index`'s history every 5 ms until `ready` says yes, for at most `limit`.
    pub fn wait_until(
        &self,
        index: usize,
        limit: Duration,
        mut ready: impl FnMut(&[Record]) -> bool,
    ) -> bool {
        let until = Instant::now() + limit;
        loop {
            if ready(&self.records(index)) {
                return true;
            }
            if Instant::now() >= until {
                return false;
            }
            thread::sleep(Duration::from_millis(5));
        }
    }

    /// Waits until worker `index` holds a lock (at most `limit`); returns its name.
    pub fn wait_holding(&self, index: usize, limit: Duration) -> Option<String> {
        let mut held = None;
        let _ = self.wait_until(index, limit, |records| {
            held = holding(records);
            held.is_some()
        });
        held
    }

    /// Waits until worker `index` holds a lock and has acquired `times` times at least (at most
    /// `limit`); returns the lock's name. A worker whose tasks hand a lock to each other is then in
    /// the middle of a streak, most likely.
    pub fn wait_holding_again(
        &self,
        index: usize,
        limit: Duration,
        times: usize,
    ) -> Option<String> {
        let mut held = None;
        let _ = self.wait_until(index, limit, |records| {
            let acquired = records
                .iter()
                .filter(|r| matches!(r.event, Event::Acquired { .. }))
                .count();
            held = holding(records).filter(|_| acquired >= times);
            held.is_some()
        });
        held
    }

    /// `kill -9` of worker `index`, recorded at the moment it is dead.
    pub fn kill(&mut self, index: usize) {
        let worker = &mut self.workers[index];
        let mut child = worker.child.take().expect("the worker is running");
        child.kill().expect("SIGKILL the worker");
        let _ = child.wait();
        worker.killed = true;
        let name = worker.name.clone();
        self.record_fault(&name, FaultKind::KillHolder);
    }

    /// Freezes worker `index` with `SIGSTOP`.
    pub fn stop(&self, index: usize) {
        self.signal(index, rustix::process::Signal::STOP);
    }

    /// Resumes worker `index` with `SIGCONT`.
    pub fn resume(&self, index: usize) {
        self.signal(index, rustix::process::Signal::CONT);
    }

    fn signal(&self, index: usize, signal: rustix::process::Signal) {
        let child = self.workers[index]
            .child
            .as_ref()
            .expect("the worker is running");
        let pid = rustix::process::Pid::from_raw(child.id() as i32).expect("a child has a pid");
        rustix::process::kill_process(pid, signal).expect("signal the worker");
    }

    /// Records a fault injected into `process` (`redis` for the server) now.
    pub fn record_fault(&mut self, process: &str, kind: FaultKind) {
        self.faults.push(Record {
            process: process.to_owned(),
            at_ns: now_ns(),
            event: Event::Fault { kind },
        });
    }

    /// Ends the run: waits until every live worker has finished its attempts, gives Redis `settle`
    /// to drop every lock (released holds, undone acquires and the leases of killed workers), lists
    /// what is left as leaked, lets the workers exit, and checks the histories.
    ///
    /// # Panics
    ///
    /// When a worker does not finish in time or cannot be reaped, or a history is unreadable.
    pub fn finish(mut self, settle: Duration) -> Report {
        self.wait_finished();
        let leaked = self.leftover_locks(settle);
        let mut exits = Vec::new();
        for worker in &mut self.workers {
            drop(worker.stdin.take());
            if let Some(mut child) = worker.child.take() {
                exits.push((worker.name.clone(), wait_exit(&mut child)));
            }
        }
        let mut history = History::new();
        for index in 0..self.workers.len() {
            history.extend(self.records(index));
        }
        history.extend(self.faults.iter().cloned());
        keep(&history);
        let mut report = history.check();
        report.leaked = leaked;
        for (name, status) in exits {
            if !status.is_some_and(|s| s.success()) {
                report
                    .panics
                    .push(format!("{name} exited abnormally: {status:?}"));
            }
        }
        report
    }

    /// Waits until every live worker has finished its attempts (its clients still alive, until
    /// [`Fleet::finish`]): a scenario may look at Redis, and give back what killed holders left
    /// taken, before the leak check.
    ///
    /// # Panics
    ///
    /// When a worker does not finish in time.
    pub fn wait_finished(&self) {
        for index in 0..self.workers.len() {
            if self.workers[index].killed {
                continue;
            }
            let limit = self.workers[index]
                .finish_by
                .saturating_duration_since(Instant::now());
            let finished = self.wait_until(index, limit, |records| {
                records
                    .iter()
                    .any(|r| matches!(r.event, Event::Finished { .. }))
            });
            if !finished {
                // What it was doing when time ran out: its last records, newest last.
                let records = self.records(index);
                let last = &records[records.len().saturating_sub(8)..];
                panic!(
                    "worker {} did not finish; its last records:\n{last:#?}",
                    self.workers[index].name
                );
            }
        }
    }

    /// Polls until none of the fleet's locks has a key left (see [`lock_keys`]), on its server and
    /// on the other servers its workers used (a multi-lock's), and none of its semaphores has a
    /// permit taken (see [`permits_taken`]), for at most `settle`; describes the rest.
    fn leftover_locks(&self, settle: Duration) -> Vec<String> {
        let mut conns: Vec<(String, redis::Connection)> = std::iter::once(&self.url)
            .chain(&self.other_urls)
            .map(|url| (url.clone(), connect(url)))
            .collect();
        let until = Instant::now() + settle;
        // Each key's PTTL when it was first seen: one whose PTTL went up since is renewed by a
        // live client (a hold somebody still believes in, or an unfinished task), one whose PTTL
        // only fell would have expired by itself (settle shorter than its lease).
        let mut first_pttl: BTreeMap<(usize, String), i64> = BTreeMap::new();
        // The workers by node id, to name who owns a left field.
        let nodes: Vec<(String, String)> = (0..self.workers.len())
            .filter_map(|index| {
                self.records(index).into_iter().find_map(|r| match r.event {
                    Event::Ready { node_id } => Some((node_id, self.workers[index].name.clone())),
                    _ => None,
                })
            })
            .collect();
        loop {
            let mut left = Vec::new();
            for (i, (url, conn)) in conns.iter_mut().enumerate() {
                let keys: Vec<String> = self
                    .names
                    .iter()
                    .flat_map(|name| lock_keys(conn, name))
                    .collect();
                // Only the fleet's own server says where (most fleets have no other).
                let at = if i == 0 {
                    String::new()
                } else {
                    format!(" on {url}")
                };
                for key in &keys {
                    let pttl: i64 = redis::cmd("PTTL").arg(key).query(conn).expect("PTTL");
                    let first = *first_pttl.entry((i, key.clone())).or_insert(pttl);
                    left.push(describe_left(conn, key, (first, pttl), &nodes) + &at);
                }
                if i == 0 {
                    left.extend(self.counted.iter().filter_map(|(name, &(kind, permits))| {
                        permits_taken(conn, name, kind, permits)
                    }));
                }
            }
            if left.is_empty() || Instant::now() >= until {
                return left;
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// The directory holding the histories (kept until the fleet is dropped).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for worker in &mut self.workers {
            if let Some(mut child) = worker.child.take() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

/// Appends every record of `history` (one JSON line each) to the file `$RLOCK_KEEP_HISTORY`, if
/// set: the fleet's own files go with its temporary directory, and an overlap is studied in them.
fn keep(history: &History) {
    use std::io::Write;
    let Some(path) = std::env::var_os("RLOCK_KEEP_HISTORY") else {
        return;
    };
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .expect("open $RLOCK_KEEP_HISTORY");
    for record in history.records() {
        let line = serde_json::to_string(record).expect("a record serializes");
        writeln!(file, "{line}").expect("append to $RLOCK_KEEP_HISTORY");
    }
}

/// A blocking connection to `url` for looking at what is left.
fn connect(url: &str) -> redis::Connection {
    let conn = redis::Client::open(url)
        .expect("a valid URL")
        .get_connection_with_timeout(Duration::from_secs(5))
        .expect("connect to Redis to look for leaked holds");
    conn.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("read timeout");
    conn
}

/// What semaphore `name` (of `kind`, set up with `permits`) has left taken, described; `None` when
/// all its permits are available. An expirable semaphore's taken permits are its `{name}:timeout`
/// members, expired ones included until some call counts them back in (docs/protocol.md §8.6).
fn permits_taken(
    conn: &mut redis::Connection,
    name: &str,
    kind: Synchronizer,
    permits: u32,
) -> Option<String> {
    let available: Option<i64> = redis::cmd("GET").arg(name).query(conn).expect("GET");
    let mut taken = Vec::new();
    if available != Some(i64::from(permits)) {
        taken.push(format!(
            "semaphore {name:?}: {available:?} of its {permits} permits available"
        ));
    }
    if kind == Synchronizer::Expirable {
        let timeouts = if name.contains('{') {
            format!("{name}:timeout")
        } else {
            format!("{{{name}}}:timeout")
        };
        let exists: bool = redis::cmd("EXISTS")
            .arg(&timeouts)
            .query(conn)
            .expect("EXISTS");
        if exists {
            let ids: Vec<(Vec<u8>, String)> = redis::cmd("ZRANGE")
                .arg(&timeouts)
                .arg(0)
                .arg(-1)
                .arg("WITHSCORES")
                .query(conn)
                .expect("ZRANGE");
            let ids: Vec<String> = ids
                .iter()
                .map(|(id, expiry)| match <[u8; 16]>::try_from(id.as_slice()) {
                    Ok(id) => format!("{} until {expiry}", PermitId::from_bytes(id)),
                    Err(_) => format!("{id:?} until {expiry}"),
                })
                .collect();
            taken.push(format!("{timeouts}: permits taken {ids:?}"));
        }
    }
    (!taken.is_empty()).then(|| taken.join("; "))
}

/// Waits up to ten seconds for a child told to exit; kills it after that.
fn wait_exit(child: &mut Child) -> Option<std::process::ExitStatus> {
    let until = Instant::now() + Duration::from_secs(10);
    while Instant::now() < until {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

/// The keys of lock `name` that exist: those every hold or waiter of any kind may leave behind
/// (docs/protocol.md §1.4) — the lock hash, a fair lock's queue and deadlines, read holds' timeout
/// keys (`{name}:<field>:rwlock_timeout:<k>`). A fenced lock's token counter never expires by
/// design and is not one of them. `name` must be free of glob characters.
fn lock_keys(conn: &mut redis::Connection, name: &str) -> Vec<String> {
    // Redisson's hash tag: the name's own braces, or braces around it.
    let tag = if name.contains('{') {
        name.to_owned()
    } else {
        format!("{{{name}}}")
    };
    let mut keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{tag}:*:rwlock_timeout:*"))
        .query(conn)
        .expect("KEYS");
    keys.extend(
        [
            name.to_owned(),
            format!("redisson_lock_queue:{tag}"),
            format!("redisson_lock_timeout:{tag}"),
        ]
        .into_iter()
        .filter(|key| redis::cmd("EXISTS").arg(key).query(conn).expect("EXISTS")),
    );
    keys
}

/// A key left after the run, as [`describe`] gives it, with what says who left it: whether its
/// PTTL went up from `first` to `now` during the settle (a live client renews it), and the workers
/// (`nodes`: node id, worker) whose fields it holds.
fn describe_left(
    conn: &mut redis::Connection,
    key: &str,
    (first, now): (i64, i64),
    nodes: &[(String, String)],
) -> String {
    let mut described = describe(conn, key);
    if now > first {
        described += &format!(" [renewed during the settle: PTTL {first} -> {now} ms]");
    }
    let owners: Vec<&str> = nodes
        .iter()
        .filter(|(node, _)| described.contains(node.as_str()))
        .map(|(_, worker)| worker.as_str())
        .collect();
    if !owners.is_empty() {
        described += &format!(" [field of {}]", owners.join(", "));
    }
    described
}

/// A key left behind, with its type, TTL and contents.
fn describe(conn: &mut redis::Connection, key: &str) -> String {
    let kind: String = redis::cmd("TYPE").arg(key).query(conn).expect("TYPE");
    let read = match kind.as_str() {
        "hash" => redis::cmd("HGETALL").arg(key).clone(),
        "list" => redis::cmd("LRANGE").arg(key).arg(0).arg(-1).clone(),
        "zset" => redis::cmd("ZRANGE")
            .arg(key)
            .arg(0)
            .arg(-1)
            .arg("WITHSCORES")
            .clone(),
        _ => redis::cmd("GET").arg(key).clone(),
    };
    let contents: Vec<String> = read.query(conn).unwrap_or_default();
    let pttl: i64 = redis::cmd("PTTL").arg(key).query(conn).expect("PTTL");
    format!("{key} ({kind}, pttl {pttl} ms): {contents:?}")
}

/// The lock an attempt in `records` has acquired and not yet started to release.
fn holding(records: &[Record]) -> Option<String> {
    open_hold(records).map(|(name, _)| name.to_owned())
}

/// The lock and hash field of the hold an attempt in `records` has acquired and not yet started to
/// release.
fn open_hold(records: &[Record]) -> Option<(&str, &str)> {
    // Per open hold: its attempt, lock and field.
    let mut open: Vec<(u32, u64, &str, &str)> = Vec::new();
    let mut names = std::collections::HashMap::new();
    for record in records {
        match &record.event {
            Event::Started {
                task, seq, name, ..
            } => {
                let _ = names.insert((*task, *seq), name.as_str());
            }
            Event::Acquired {
                task, seq, field, ..
            } => {
                if let Some(name) = names.get(&(*task, *seq)) {
                    open.push((*task, *seq, name, field.as_str()));
                }
            }
            Event::Releasing { task, seq, .. } | Event::Released { task, seq, .. } => {
                open.retain(|hold| (hold.0, hold.1) != (*task, *seq));
            }
            _ => {}
        }
    }
    open.last().map(|&(_, _, name, field)| (name, field))
}
