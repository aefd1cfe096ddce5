//! `rlock-torture`: the worker process of the reliability suite, and the summariser of its figures.
//!
//! ```text
//! rlock-torture work --url URL --process NAME --log FILE --names a,b [--tasks 3] [--run-ms 2000]
//!                    [--hold-ms 5] [--think-ms 2] [--watchdog-ms 1000] [--command-timeout-ms 300]
//!                    [--pool-size 4] [--wait-ms W] [--cancel-percent P] [--cancel-within-us 3000]
//!                    [--kind lock|fair|spin|fenced|read|write|rw|non-reentrant|non-reentrant-fair
//!                           |mixed]
//!                    [--fair-wait-timeout-ms 5000]
//!                    [--topology single|master-replica|sentinel|cluster] [--nodes URL,...]
//!                    [--nat-map HOST:PORT=HOST:PORT,...] [--master-name NAME] [--fence-url URL]
//!                    [--no-local-handoff] [--local-handoff-window-ms MS] [--no-replica-acks]
//!                    [--steady-hold] [--try-after-release] [--reenter-max N] [--join-percent P]
//!                    [--lease-percent P] [--outer-first-percent P] [--replace-percent P]
//!                    [--force-unlock-percent P] [--java] [--ping-interval-ms MS]
//!                    [--synchronizer semaphore|expirable|latch|multi|group] [--permits 1]
//!                    [--take-min 1] [--take-max 1] [--lease-ms MS] [--multi-url URL]
//! rlock-torture summarize FILE...
//! ```
//!
//! `work` runs `--tasks` tasks on one rlock client, each acquiring a random lock of `--names` (of
//! `--kind`; `rw` takes the read or the write side of the read-write lock at random each time)
//! over and over for `--run-ms`, and logs every step as a JSON line (see `rlock_tests::history`):
//! inside each hold it takes a fence (`INCR <name>:fence`; a fenced lock's own token), holds for
//! `--hold-ms`, stops early if the lease is lost, reads the fence back and unlocks. Read holds are
//! logged as such, and a fair-lock waiter logs when it is seen in the lock's queue. A share of
//! attempts (`--cancel-percent`) is dropped after a random delay, to storm the cancellation paths.
//! The tasks of one process hand exclusive locks to each other locally (rlock's default) unless
//! `--no-local-handoff` is given, so that a fleet can mix both behaviours on one lock;
//! `--local-handoff-window-ms` lets a streak of hand-offs last longer than the default 10 ms.
//! `--steady-hold` makes every hold last exactly `--hold-ms` (by default ±50 %). `--lease-ms`
//! gives a lock's holds a fixed lease instead of the watchdog's: they then pass from task to task
//! by the hand-off script, never freely.
//! `--try-after-release`: right after a task releases a lock's hold, the same owner makes one
//! one-shot `try_lock()`, logged as an attempt of its own (waiting 0 ms) and held like any hold if
//! it acquires. Had the release passed the lock on to another task (a hand-off, free or by script),
//! that try must find the lock held: during a streak the client answers it locally, and the
//! streak's first owner's field in Redis must not let it in.
//! `--ping-interval-ms` sets the client's `ping_connection_interval`: how soon a subscriber
//! connection gone deaf is found out.
//! `--no-replica-acks` turns `check_lock_synced_replicas` off: in a replicated topology, lock writes
//! then return whether or not a replica acknowledged them (the worker logs which, for failovers).
//!
//! What users do besides, each off by default (the checker holds the holds of one owner, which
//! every lock attempt names in its `Started` record, to be one hold):
//! - `--kind mixed`: each attempt, and each re-entry, takes one of the five kinds that share the
//!   lock's hash (lock, spin, fair, fenced, non-reentrant) of its name at random; every hold takes
//!   the `INCR` fence then.
//! - `--reenter-max N`: once it holds, the owner re-enters the lock 0..=N times more (a depth picked
//!   at random), nested, each re-entry an attempt of its own, released innermost first. A refused
//!   re-entry (`ReentryRefused`: the non-reentrant lock's, a fenced re-entry of a lent hold) is
//!   logged as failed, and the holder holds on. An owner that re-enters acquires inside its
//!   `Owner::scope` half the time, else through handles bound to it (`with_owner`).
//! - `--join-percent P`: P % of attempts are two futures of one owner run at once with
//!   `tokio::join!`: the same owner, so they re-enter each other's hold.
//! - `--lease-percent P`: P % of an rlock worker's lock acquisitions, first holds and re-entries
//!   alike, take a fixed lease of 1 to 15 holds instead of the watchdog's, so that nested holds mix
//!   `lock()` and `lock_with_lease` with leases shorter and longer than the holds around them
//!   (issue 46); a fixed lease that runs out inside its hold is a signalled lease loss.
//! - `--outer-first-percent P`: P % of an rlock owner's re-entries are released outer-first: the
//!   hold around the re-entry is released as soon as the re-entry returned, and the re-entry holds
//!   on after it (with `--kind mixed`, often a hold through another kind: a `Lock` released while
//!   the `SpinLock` of the same name still holds, say).
//! - `--replace-percent P`: P % of an rlock owner's first holds taken with a fixed lease are kept
//!   past their lease, as a guard kept in a slot is (`slot = Some(lock.lock().await?)`): once the
//!   lease ran out (the guard's `lease_lost()` fired), the owner acquires the lock again, and the old
//!   guard is dropped only once that acquisition returned; the new hold goes on as any other.
//! - `--force-unlock-percent P`: after P % of its attempts, a task force-unlocks a random lock of
//!   `--names` through its own client, by one of the five kinds that share the hash, whoever holds
//!   it; one that found the lock held is logged as a fault (`local_force_unlock`).
//! - `--java`: the attempts are an emulated Redisson client's (`rlock_tests::redisson`, Redisson
//!   4.x), by its objects of `--kind` (`mixed`: the same at random, but the fair lock, whose Java
//!   unlock of a lock that no longer exists succeeds: `JAVA_HASH_SHARING`), each by a fresh Java
//!   thread, re-entering on that thread; a hold always takes the `INCR` fence. Single server only.
//!
//! With `--synchronizer` the tasks contend for that synchronizer of each name instead, logged as
//! holds of it (see `Synchronizer`): a semaphore's attempts take `--take-min`..=`--take-max` of its
//! `--permits` permits (set up by the first worker; every worker declares them with a `permits`
//! record) and hold them as a lock's, an expirable semaphore's for `--lease-ms` (stopping early once
//! the lease may have run out); a latch's attempts wait until it is open (count-downs are the
//! harness's); a multi-lock's take the lock of the name on `--url` and on `--multi-url` as one; a
//! group lock's take the values `a`, `b` and `c` of the group named, all of them, as one lock.
//! Holds of a synchronizer take the same fence as a lock's.
//! When done it logs its client's hand-off figures (`hand_offs`: its `ClientStats`), then
//! `finished`, and keeps its client alive until its standard input closes, so the
//! harness can check Redis for left-over holds while the client could still be renewing them.
//!
//! `summarize` adds up the JSON summaries (one per line) that the fault scenarios append to
//! `$RLOCK_FAULTS_REPORT`, and prints the totals.

use std::io::{BufRead, Read};
use std::path::PathBuf;
use std::pin::{Pin, pin};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use clap::{Parser, Subcommand};
use redis::aio::MultiplexedConnection;
use rlock_redisson::kind::{self, LockKind};
use rlock_redisson::{
    Client, Config, Error, GroupGuard, Guard, Lock, MultiGuard, MultiLock, Owner,
    PermitExpirableSemaphore, PermitId, SemaphorePermits,
};
use rlock_tests::history::fleet::{FleetKind, HASH_SHARING, JAVA_HASH_SHARING, Synchronizer};
use rlock_tests::history::{Event, FaultKind, LogWriter, Mode, Summary, error_kind, now_ns};
use rlock_tests::redisson::{
    JavaClient, JavaConfig, JavaError, JavaObject, ObjectKind, ReadKind, RedissonVersion, ThreadId,
    WriteKind,
};
use rlock_tests::{java_object, rlock_object};
use tokio::sync::{Mutex, Notify};
use tokio::time::Instant;

#[derive(Parser)]
#[command(about = "Worker and summariser of rlock's reliability suite")]
struct Cli {
    #[command(subcommand)]
    command: Commands,
}

#[derive(Subcommand)]
enum Commands {
    /// Contend for locks and log every acquisition.
    Work(Box<WorkArgs>),
    /// Add up fault-scenario summaries (JSON lines) and print the totals.
    Summarize {
        /// Files of summaries, one JSON object per line.
        files: Vec<PathBuf>,
    },
}

#[derive(Parser, Clone)]
struct WorkArgs {
    /// The server, master, first cluster seed or first sentinel.
    #[arg(long)]
    url: String,
    #[arg(long, value_enum, default_value_t)]
    topology: TopologyArg,
    /// More cluster seeds or sentinels.
    #[arg(long, value_delimiter = ',')]
    nodes: Vec<String>,
    /// Cluster address translation, `announced=reachable` pairs of `host:port`.
    #[arg(long, value_delimiter = ',')]
    nat_map: Vec<String>,
    /// The master's name, for `--topology sentinel`.
    #[arg(long, default_value = "")]
    master_name: String,
    /// Where the fences live (default: `--url`): the real master when `--url` is a proxy.
    #[arg(long)]
    fence_url: Option<String>,
    /// This process's name in the history.
    #[arg(long)]
    process: String,
    /// The history file (appended to).
    #[arg(long)]
    log: PathBuf,
    /// Comma-separated lock names.
    #[arg(long, value_delimiter = ',')]
    names: Vec<String>,
    #[arg(long, default_value_t = 3)]
    tasks: u32,
    #[arg(long, default_value_t = 2000)]
    run_ms: u64,
    #[arg(long, default_value_t = 5)]
    hold_ms: u64,
    #[arg(long, default_value_t = 2)]
    think_ms: u64,
    #[arg(long, default_value_t = 1000)]
    watchdog_ms: u64,
    #[arg(long, default_value_t = 300)]
    command_timeout_ms: u64,
    #[arg(long, default_value_t = 4)]
    pool_size: usize,
    /// Acquire with `try_lock_for(wait)` instead of `lock()`.
    #[arg(long)]
    wait_ms: Option<u64>,
    #[arg(long, default_value_t = 0)]
    cancel_percent: u8,
    #[arg(long, default_value_t = 3000)]
    cancel_within_us: u64,
    #[arg(long, value_enum, default_value_t)]
    kind: FleetKind,
    /// The client's `fair_lock_wait_timeout`.
    #[arg(long, default_value_t = 5000)]
    fair_wait_timeout_ms: u64,
    /// Turns the client's local queue and hand-off off (`Config::local_handoff`): every task races
    /// in Redis on its own, as Redisson's threads do.
    #[arg(long)]
    no_local_handoff: bool,
    /// The client's `local_handoff_window` (default: the client's).
    #[arg(long)]
    local_handoff_window_ms: Option<u64>,
    /// Turns `Config::check_lock_synced_replicas` off.
    #[arg(long)]
    no_replica_acks: bool,
    /// Holds last exactly `--hold-ms`, without jitter.
    #[arg(long)]
    steady_hold: bool,
    /// After each release of a lock's hold, the same owner makes one one-shot `try_lock()`.
    #[arg(long)]
    try_after_release: bool,
    /// Contend for this synchronizer of each name instead of a lock of `--kind`.
    #[arg(long, value_enum)]
    synchronizer: Option<Synchronizer>,
    /// A semaphore's permits, set up if it has none yet.
    #[arg(long, default_value_t = 1)]
    permits: u32,
    /// The fewest permits an attempt on a semaphore takes.
    #[arg(long, default_value_t = 1)]
    take_min: u32,
    /// The most permits an attempt on a semaphore takes.
    #[arg(long, default_value_t = 1)]
    take_max: u32,
    /// The lease of an expirable semaphore's permits (default: they do not expire), or of a lock's
    /// holds (default: the watchdog renews them).
    #[arg(long)]
    lease_ms: Option<u64>,
    /// The Redis of a multi-lock's second members.
    #[arg(long)]
    multi_url: Option<String>,
    /// Once it holds, the owner re-enters the lock up to this many times more, nested.
    #[arg(long, default_value_t = 0)]
    reenter_max: u32,
    /// Percentage of attempts made as two futures of one owner at once.
    #[arg(long, default_value_t = 0)]
    join_percent: u8,
    /// Percentage of an rlock worker's lock acquisitions (first holds and re-entries alike) taken
    /// with a fixed lease of 1 to 15 holds (`lock_with_lease`) instead of the watchdog's, unless
    /// `--lease-ms` fixes every lease.
    #[arg(long, default_value_t = 0)]
    lease_percent: u8,
    /// Percentage of an rlock owner's re-entries released outer-first: the hold around the re-entry
    /// is released once the re-entry returned, the re-entry holds on after it.
    #[arg(long, default_value_t = 0)]
    outer_first_percent: u8,
    /// Percentage of an rlock owner's first holds with a fixed lease kept past their lease, then
    /// replaced: the owner acquires again, and drops the old guard once that returned.
    #[arg(long, default_value_t = 0)]
    replace_percent: u8,
    /// Percentage of attempts after which the task force-unlocks one of the locks on its own
    /// client.
    #[arg(long, default_value_t = 0)]
    force_unlock_percent: u8,
    /// Attempts by an emulated Redisson (Java) client instead of rlock.
    #[arg(long)]
    java: bool,
    /// The client's `ping_connection_interval` (default: the client's).
    #[arg(long)]
    ping_interval_ms: Option<u64>,
}

/// `--topology`: which [`Config`] constructor the client is built with.
#[derive(Clone, Copy, Debug, Default, clap::ValueEnum)]
enum TopologyArg {
    #[default]
    Single,
    MasterReplica,
    Sentinel,
    Cluster,
}

impl WorkArgs {
    /// The client's configuration, with the tunables.
    fn config(&self) -> Config {
        let mut config = self.topology_config();
        self.tune(&mut config);
        config
    }

    /// The configuration of the client of a multi-lock's second members: a single server.
    fn second_config(&self) -> Option<Config> {
        let mut config = Config::new(self.multi_url.clone()?);
        self.tune(&mut config);
        Some(config)
    }

    fn tune(&self, config: &mut Config) {
        config.watchdog_timeout = Duration::from_millis(self.watchdog_ms);
        config.command_timeout = Duration::from_millis(self.command_timeout_ms);
        config.pool_size = self.pool_size;
        config.retry_delay = Duration::from_millis(100);
        config.retry_max_delay = Duration::from_millis(200);
        config.fair_lock_wait_timeout = Duration::from_millis(self.fair_wait_timeout_ms);
        config.local_handoff = !self.no_local_handoff;
        if let Some(window) = self.local_handoff_window_ms {
            config.local_handoff_window = Duration::from_millis(window);
        }
        config.check_lock_synced_replicas = !self.no_replica_acks;
        if let Some(interval) = self.ping_interval_ms {
            config.ping_connection_interval = Duration::from_millis(interval);
        }
    }

    /// The emulated Redisson client of `--java` (4.x, which has every kind of the family), with the
    /// worker's watchdog timeout and fair-lock wait; `None` without `--java`.
    async fn java_client(&self) -> Result<Option<JavaClient>, String> {
        if !self.java {
            return Ok(None);
        }
        let lock_kind = self.kind == FleetKind::Mixed || self.kind.object().is_some();
        if !matches!(self.topology, TopologyArg::Single)
            || self.synchronizer.is_some()
            || !lock_kind
        {
            return Err("Java attempts are on a single server, of a lock kind or mixed".to_owned());
        }
        let config = JavaConfig {
            lock_watchdog_timeout: Duration::from_millis(self.watchdog_ms),
            fair_lock_wait_timeout: Duration::from_millis(self.fair_wait_timeout_ms),
            ..JavaConfig::default()
        };
        let connected = JavaClient::connect_with(&self.url, RedissonVersion::V4, config).await;
        connected.map(Some).map_err(|e| e.to_string())
    }

    /// The client's configuration, before the tunables.
    fn topology_config(&self) -> Config {
        let addresses = std::iter::once(self.url.clone()).chain(self.nodes.iter().cloned());
        let mut config = match self.topology {
            TopologyArg::Single => Config::new(self.url.clone()),
            TopologyArg::MasterReplica => Config::master_replica(self.url.clone()),
            TopologyArg::Sentinel => Config::sentinel(self.master_name.clone(), addresses),
            TopologyArg::Cluster => Config::cluster(addresses),
        };
        config.nat_map = self
            .nat_map
            .iter()
            .filter_map(|pair| pair.split_once('='))
            .map(|(from, to)| (from.to_owned(), to.to_owned()))
            .collect();
        config
    }
}

/// How long the tasks may take to finish their last attempt after the run.
const FINISH_GRACE: Duration = Duration::from_secs(20);
/// How long a finished worker waits for its standard input to close before it exits anyway.
const MAX_LINGER: Duration = Duration::from_secs(300);

/// The history, for the panic hook.
static LOG: OnceLock<Arc<LogWriter>> = OnceLock::new();

fn main() -> ExitCode {
    match Cli::parse().command {
        Commands::Work(args) => work(*args),
        Commands::Summarize { files } => summarize(&files),
    }
}

fn work(args: WorkArgs) -> ExitCode {
    let log = match LogWriter::open(&args.log, &args.process) {
        Ok(log) => Arc::new(log),
        Err(e) => {
            eprintln!("rlock-torture: cannot open {}: {e}", args.log.display());
            return ExitCode::FAILURE;
        }
    };
    let _ = LOG.set(log.clone());
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if let Some(log) = LOG.get() {
            let _ = log.write_now(Event::Panicked {
                message: info.to_string(),
            });
        }
        default_hook(info);
    }));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let code = runtime.block_on(Worker::run(args, log));
    // Background tasks (undos, releases of dropped guards) get no more time: exiting is a crash
    // the checker and the harness account for.
    runtime.shutdown_timeout(Duration::from_millis(100));
    code
}

/// One worker process: a client, a fence connection, the history.
struct Worker {
    args: WorkArgs,
    client: Client,
    /// The client of a multi-lock's second members (`--multi-url`).
    second: Option<Client>,
    /// The emulated Redisson client whose threads make the attempts (`--java`).
    java: Option<JavaClient>,
    /// The Java thread ids handed out so far: each attempt takes a fresh one.
    java_threads: AtomicU64,
    fences: Fences,
    log: Arc<LogWriter>,
}

impl Worker {
    async fn run(args: WorkArgs, log: Arc<LogWriter>) -> ExitCode {
        let connected = async {
            let second = match args.second_config() {
                Some(config) => Some(Client::with_config(config).await?),
                None => None,
            };
            Ok::<_, Error>((Client::with_config(args.config()).await?, second))
        };
        let (client, second) = match connected.await {
            Ok(clients) => clients,
            Err(e) => {
                eprintln!("rlock-torture {}: cannot connect: {e}", args.process);
                return ExitCode::FAILURE;
            }
        };
        if args.synchronizer == Some(Synchronizer::Multi) && second.is_none() {
            eprintln!(
                "rlock-torture {}: a multi-lock needs --multi-url",
                args.process
            );
            return ExitCode::FAILURE;
        }
        let java = match args.java_client().await {
            Ok(java) => java,
            Err(e) => {
                eprintln!("rlock-torture {}: --java: {e}", args.process);
                return ExitCode::FAILURE;
            }
        };
        let node_id = java.as_ref().map_or(client.node_id(), JavaClient::id);
        let _ = log.write_now(Event::Ready {
            node_id: node_id.to_owned(),
        });
        if !matches!(args.topology, TopologyArg::Single) {
            let _ = log.write_now(Event::ReplicaAcks {
                required: !args.no_replica_acks,
            });
        }
        let worker = Arc::new(Self {
            fences: Fences::new(args.fence_url.as_deref().unwrap_or(&args.url)),
            args,
            client,
            second,
            java,
            java_threads: AtomicU64::new(0),
            log,
        });
        if let Err(e) = worker.set_up_permits().await {
            eprintln!(
                "rlock-torture {}: cannot set up permits: {e}",
                worker.args.process
            );
            return ExitCode::FAILURE;
        }
        let stdin_closed = stdin_closed();
        let deadline = Instant::now() + Duration::from_millis(worker.args.run_ms);
        let tasks: Vec<_> = (0..worker.args.tasks)
            .map(|task| tokio::spawn(worker.clone().task(task, deadline)))
            .collect();
        let mut unfinished = 0;
        for task in tasks {
            let finish_by = deadline + FINISH_GRACE;
            match tokio::time::timeout_at(finish_by, task).await {
                Ok(Ok(())) => {}
                Ok(Err(panicked)) => eprintln!("rlock-torture: a task failed: {panicked}"),
                Err(_) => unfinished += 1,
            }
        }
        let stats = worker.client.stats();
        let _ = worker.log.write_now(Event::HandOffs {
            local: stats.local_handoffs,
            free: stats.free_handoffs,
            streaks: stats.handoff_streaks,
        });
        let _ = worker.log.write_now(Event::Finished { unfinished });
        let _ = tokio::time::timeout(MAX_LINGER, stdin_closed).await;
        ExitCode::SUCCESS
    }

    /// Acquires, holds and releases random locks until `deadline`, force-unlocking one now and
    /// then with `--force-unlock-percent`.
    async fn task(self: Arc<Self>, task: u32, deadline: Instant) {
        let seqs = Seqs::default();
        while Instant::now() < deadline {
            self.attempt(task, &seqs, self.any_name()).await;
            if percent(self.args.force_unlock_percent) {
                self.force_unlock(self.any_name()).await;
            }
            tokio::time::sleep(jitter(self.args.think_ms)).await;
        }
    }

    /// One of `--names`, at random.
    fn any_name(&self) -> &str {
        &self.args.names[fastrand::usize(..self.args.names.len())]
    }

    /// A force unlock of lock `name` through this worker's own client, by one of the kinds that
    /// share its hash, whoever holds it: logged as a fault if it found the lock held.
    async fn force_unlock(&self, name: &str) {
        let object = HASH_SHARING[fastrand::usize(..HASH_SHARING.len())];
        let forced = rlock_object!(object.rlock(&self.client, name), lock => {
            lock.force_unlock().await
        });
        match forced {
            Ok(true) => {
                let _ = self.log.write_now(Event::Fault {
                    kind: FaultKind::LocalForceUnlock,
                });
            }
            Ok(false) => {}
            Err(e) => eprintln!("rlock-torture {}: force unlock: {e}", self.args.process),
        }
    }

    /// Sets up the permits of the semaphores of `--synchronizer` (the first worker does; the others
    /// find them there) and declares them.
    async fn set_up_permits(&self) -> Result<(), Error> {
        let permits = self.args.permits;
        for name in &self.args.names {
            match self.args.synchronizer {
                Some(Synchronizer::Semaphore) => {
                    let _ = self.client.semaphore(name).try_set_permits(permits).await?;
                }
                Some(Synchronizer::Expirable) => {
                    let semaphore = self.client.permit_expirable_semaphore(name);
                    let _ = semaphore.try_set_permits(permits).await?;
                }
                _ => return Ok(()),
            }
            let name = name.clone();
            let _ = self.log.write_now(Event::Permits { name, permits });
        }
        Ok(())
    }

    /// One attempt on lock (or synchronizer) `name` of the worker's kind by a fresh owner, with
    /// its re-entries (`--reenter-max`), its one-shot try after the release
    /// (`--try-after-release`), or as two futures of that owner (`--join-percent`), numbered by
    /// `seqs`.
    async fn attempt(&self, task: u32, seqs: &Seqs, name: &str) {
        if let Some(synchronizer) = self.args.synchronizer {
            return self
                .attempt_synchronizer(task, seqs.next(), name, synchronizer)
                .await;
        }
        let depth = fastrand::u32(..=self.args.reenter_max);
        if self.java.is_some() {
            let thread = self.java_threads.fetch_add(1, Ordering::Relaxed) + 1;
            let who = Who::Thread(thread);
            let _ = self
                .acquire(Acquisition::new(task, seqs, name, who, depth))
                .await;
            return;
        }
        let owner = Owner::new();
        // As a user who nests acquisitions would: inside the owner's scope, or through handles
        // bound to it. Without re-entries, bound as ever.
        let nests = self.args.reenter_max > 0 || self.args.join_percent > 0;
        let scoped = nests && fastrand::bool();
        let who = Who::Owner { owner, scoped };
        let one = || self.acquire(Acquisition::new(task, seqs, name, who, depth));
        let attempts = async {
            if percent(self.args.join_percent) {
                let _ = tokio::join!(one(), one());
            } else {
                let _ = one().await;
            }
        };
        if scoped {
            Owner::scope(owner, attempts).await;
        } else {
            attempts.await;
        }
    }

    /// The Redisson object of the next acquisition: the worker's kind's, or for `mixed` one of
    /// [`HASH_SHARING`] at random; `None` for `rw` (either half at random).
    fn next_object(&self) -> Option<&'static dyn ObjectKind> {
        match self.args.kind {
            FleetKind::Mixed if self.args.java => {
                Some(JAVA_HASH_SHARING[fastrand::usize(..JAVA_HASH_SHARING.len())])
            }
            FleetKind::Mixed => Some(HASH_SHARING[fastrand::usize(..HASH_SHARING.len())]),
            kind => kind.object(),
        }
    }

    /// One acquisition as `at` says, held (with its re-entries inside) and released; resolves to
    /// whether it held. Boxed: a hold's re-entries are acquisitions too, of any kind.
    fn acquire<'a>(
        &'a self,
        at: Acquisition<'a>,
    ) -> Pin<Box<dyn Future<Output = bool> + Send + 'a>> {
        Box::pin(async move {
            let object = self.next_object();
            match (at.who, object, &self.java) {
                (Who::Thread(thread), Some(object), Some(java)) => {
                    self.attempt_java(at, object, java, thread).await
                }
                (Who::Owner { .. }, Some(object), _) => {
                    let interface = object.interface();
                    rlock_object!(object.rlock(&self.client, at.name), lock => {
                        self.attempt_on(at, lock, interface).await
                    })
                }
                (Who::Owner { .. }, None, _) => {
                    // Both halves of the read-write lock, one at random.
                    let lock = self.client.read_write_lock(at.name);
                    if fastrand::bool() {
                        self.attempt_on(at, lock.read(), ReadKind.interface()).await
                    } else {
                        self.attempt_on(at, lock.write(), WriteKind.interface())
                            .await
                    }
                }
                (Who::Thread(_), _, _) => unreachable!("checked when the worker started"),
            }
        })
    }

    /// One attempt on synchronizer `name`.
    async fn attempt_synchronizer(
        &self,
        task: u32,
        seq: u64,
        name: &str,
        synchronizer: Synchronizer,
    ) {
        let wait = self.args.wait_ms.map(Duration::from_millis);
        let take = fastrand::u32(self.args.take_min..=self.args.take_max.max(self.args.take_min));
        let exclusive = |permits| Attempted {
            task,
            seq,
            name,
            wait_ms: self.args.wait_ms,
            mode: Mode::Exclusive,
            permits,
            owner: None,
            kind: None,
        };
        match synchronizer {
            Synchronizer::Semaphore => {
                let semaphore = self.client.semaphore(name);
                let taken = async {
                    match wait {
                        Some(wait) => semaphore.try_acquire_for(take, wait).await,
                        None => semaphore.acquire(take).await.map(Some),
                    }
                };
                self.attempt_with(exclusive(take), taken, Around::default())
                    .await;
            }
            Synchronizer::Expirable => {
                let semaphore = self.client.permit_expirable_semaphore(name);
                let lease = self.args.lease_ms.map(Duration::from_millis);
                // The lease of the permits runs from the `now` of the try that took them, no
                // earlier than this.
                let until = lease.map(|lease| Instant::now() + lease);
                let taken = async {
                    let ids = match wait {
                        Some(wait) => semaphore.try_acquire_many(take, wait, lease).await?,
                        None => Some(semaphore.acquire_many(take, lease).await?),
                    };
                    Ok::<_, Error>(ids.map(|ids| ExpirablePermits {
                        semaphore: semaphore.clone(),
                        ids,
                        until,
                    }))
                };
                self.attempt_with(exclusive(take), taken, Around::default())
                    .await;
            }
            Synchronizer::Latch => {
                let latch = self.client.count_down_latch(name);
                let opened = async {
                    match wait {
                        Some(wait) => Ok(latch.await_for(wait).await?.then_some(Opened)),
                        None => latch.await_zero().await.map(|()| Some(Opened)),
                    }
                };
                let waiting = Attempted {
                    mode: Mode::Read,
                    ..exclusive(1)
                };
                self.attempt_with(waiting, opened, Around::default()).await;
            }
            Synchronizer::Multi => {
                let second = self
                    .second
                    .as_ref()
                    .expect("checked when the worker started");
                let multi = MultiLock::new([self.client.lock(name), second.lock(name)])
                    .with_owner(Owner::new());
                let taken = async {
                    let guard = match wait {
                        Some(wait) => multi.try_lock_for(wait).await?,
                        None => Some(multi.lock().await?),
                    };
                    Ok::<_, Error>(guard.map(|guard| MultiHold {
                        field: format!("{}:{}", self.client.node_id(), guard.owner().id()),
                        guard,
                    }))
                };
                self.attempt_with(exclusive(1), taken, Around::default())
                    .await;
            }
            Synchronizer::Group => {
                let group = self
                    .client
                    .group_lock(name, GROUP_VALUES)
                    .expect("string values encode")
                    .with_owner(Owner::new());
                let taken = async {
                    let guard = match wait {
                        Some(wait) => group.try_lock_for(wait).await?,
                        None => Some(group.lock().await?),
                    };
                    Ok::<_, Error>(guard.map(|guard| GroupHold { guard }))
                };
                self.attempt_with(exclusive(1), taken, Around::default())
                    .await;
            }
        }
    }

    /// Logs an attempt, runs `acquire` (dropping it at random, as `--cancel-percent` says), logs its
    /// outcome and holds what it took, with what it does `around` its hold; returns whether it held
    /// (and released).
    async fn attempt_with<H: Held, E>(
        &self,
        attempted: Attempted<'_>,
        acquire: impl Future<Output = Result<Option<H>, E>>,
        around: Around<'_>,
    ) -> bool
    where
        Failure: From<E>,
    {
        let Attempted {
            task,
            seq,
            name,
            wait_ms,
            mode,
            permits,
            owner,
            kind,
        } = attempted;
        let log = |at_ns, event| {
            let _ = self.log.write(at_ns, event);
        };
        log(
            now_ns(),
            Event::Started {
                task,
                seq,
                name: name.to_owned(),
                wait_ms,
                mode,
                permits,
                owner,
                kind,
            },
        );
        let outcome = self.maybe_cancelled(acquire).await;
        let returned_at = now_ns();
        match outcome {
            Some(Ok(Some(held))) => {
                let hold = (task, seq, name, returned_at);
                self.hold_with(hold, held, around).await;
                return true;
            }
            Some(Ok(None)) => log(returned_at, Event::GaveUp { task, seq }),
            Some(Err(e)) => self.failed(task, seq, returned_at, &e.into()).await,
            None => log(returned_at, Event::Cancelled { task, seq }),
        }
        if let Some(entered) = around.entered {
            entered.tell(false);
        }
        false
    }

    /// The lease of an rlock acquisition of a lock: `--lease-ms`, else for `--lease-percent` % of
    /// them a fixed lease of 1 to 15 holds (short enough to run out inside a hold now and then, and
    /// to be shorter than the holds around it), else the watchdog's (`None`).
    fn lock_lease(&self) -> Option<Duration> {
        let hold = self.args.hold_ms.max(1);
        self.args.lease_ms.map(Duration::from_millis).or_else(|| {
            percent(self.args.lease_percent)
                .then(|| Duration::from_millis(fastrand::u64(hold..=hold * 15)))
        })
    }

    /// How long the next hold lasts.
    fn hold_time(&self) -> Duration {
        if self.args.steady_hold {
            Duration::from_millis(self.args.hold_ms)
        } else {
            jitter(self.args.hold_ms)
        }
    }

    /// Runs `acquire`, or drops it after a random delay for a share of the attempts
    /// (`--cancel-percent`): `None` then.
    async fn maybe_cancelled<T>(&self, acquire: impl Future<Output = T>) -> Option<T> {
        if fastrand::u8(..100) < self.args.cancel_percent {
            let budget = Duration::from_micros(fastrand::u64(..=self.args.cancel_within_us));
            tokio::time::timeout(budget, acquire).await.ok()
        } else {
            Some(acquire.await)
        }
    }

    /// Logs a failed attempt, then pauses (Redis is in trouble, do not spin), unless it was a
    /// refused re-entry: its holder holds on.
    async fn failed(&self, task: u32, seq: u64, at_ns: u64, e: &Failure) {
        let _ = self.log.write(
            at_ns,
            Event::Failed {
                task,
                seq,
                error: e.kind().to_owned(),
                message: e.to_string(),
            },
        );
        if e.kind() != "reentry_refused" {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The critical section of attempt `(task, seq)` on `name`, acquired at `acquired_at`: fence
    /// in; hold (stopping early if it may be lost), or make the re-entry inside it, which holds
    /// in its stead (released outer-first, `--outer-first-percent`: this hold is given back as soon
    /// as the re-entry returned); then give it back, or keep it past its lease and drop it once the
    /// acquisition that replaces it returned (`--replace-percent`).
    async fn hold_with<H: Held>(
        &self,
        (task, seq, name, acquired_at): (u32, u64, &str, u64),
        held: H,
        around: Around<'_>,
    ) {
        let fence = held.fence_in(&self.fences, name).await;
        let _ = self.log.write(
            acquired_at,
            Event::Acquired {
                task,
                seq,
                fence,
                field: held.field(),
            },
        );
        if let Some(entered) = around.entered {
            entered.tell(true);
        }
        let hold = (task, seq, name);
        let reentered = match around.inside {
            Some(inside) if percent(self.args.outer_first_percent) => {
                let outer_first = (FaultKind::OuterFirstRelease, false);
                return self.let_go_after(hold, held, inside, outer_first).await;
            }
            Some(inside) => self.acquire(inside).await,
            None => false,
        };
        // With leases mixed in, a hold goes on after the re-entry inside it was released, as the
        // code after a nested call does: the key must still be held for it.
        if !reentered || self.args.lease_percent > 0 {
            tokio::select! {
                () = tokio::time::sleep(self.hold_time()) => {}
                () = held.ends() => {}
            }
        }
        let Some(again) = around.again else {
            return self.let_go(hold, held, false).await;
        };
        // Kept in its slot past its lease, the guard is replaced by the owner's next hold.
        held.ends().await;
        self.let_go_after(hold, held, again, (FaultKind::ReplacedGuard, true))
            .await;
    }

    /// Makes the acquisition `next` of the hold's owner, and gives the hold back (see
    /// [`Worker::let_go`]: dropped or not) as soon as `next` returned, logging `habit` if `next`
    /// held: the hold released outer-first, or replaced.
    async fn let_go_after<H: Held>(
        &self,
        hold: (u32, u64, &str),
        held: H,
        next: Acquisition<'_>,
        (habit, dropped): (FaultKind, bool),
    ) {
        let entered = Entered::default();
        let given_back = async {
            if entered.held().await {
                let _ = self.log.write_now(Event::Fault { kind: habit });
            }
            self.let_go(hold, held, dropped).await;
        };
        let ((), _) = tokio::join!(given_back, self.acquire(next.entering(&entered)));
    }

    /// Fences out of hold `(task, seq)` on `name` and gives it back: unlocks it, or (`dropped`)
    /// drops its guard, as a slot given a new guard drops the old one.
    async fn let_go<H: Held>(&self, (task, seq, name): (u32, u64, &str), held: H, dropped: bool) {
        let fence_after = held.fence_out(&self.fences, name).await;
        let released_at = now_ns();
        // Logged before the unlock is sent: if this process is killed during the unlock, its hold
        // ended here, not at its death (the unlock may have run and the lock passed on).
        let _ = self.log.write(
            released_at,
            Event::Releasing {
                task,
                seq,
                fence_after,
            },
        );
        let lost_before = held.is_lost();
        let (signals, lease_end) = (held.signals(), held.lease_end());
        let released = if dropped {
            drop(held);
            Ok(false)
        } else {
            held.release().await
        };
        let signalled =
            signals.then(|| lost_before || lease_end.is_some_and(|end| Instant::now() >= end));
        // From `released_at`, rounded up: the unlock surely returned by `released_at + unlock_ms`.
        let unlock_ms = (now_ns() - released_at).div_ceil(1_000_000);
        let (lease_lost, unlock_error) = match &released {
            Ok(found_lost) => (lost_before || *found_lost, None),
            Err(e) => (
                lost_before || e.kind() == "lease_lost",
                Some(e.kind().to_owned()),
            ),
        };
        let _ = self.log.write(
            released_at,
            Event::Released {
                task,
                seq,
                fence_after,
                lease_lost,
                unlock_error,
                unlock_ms,
                signalled,
                dropped,
            },
        );
    }

    /// One acquisition through `lock` as `at` says, as an attempt of its own; and with
    /// `--try-after-release`, unless it is a re-entry, one one-shot try by the same owner right
    /// after its hold is released, as another. Returns whether the first held.
    async fn attempt_on<K: Logged>(
        &self,
        at: Acquisition<'_>,
        lock: Lock<K>,
        interface: &'static str,
    ) -> bool {
        let Who::Owner { owner, scoped } = at.who else {
            unreachable!("an rlock acquisition has an rlock owner")
        };
        // The owner is known in advance (a fair-lock waiter looks for it in the queue): the
        // handle is bound to it, or the acquisition runs inside its scope.
        let lock = if scoped { lock } else { lock.with_owner(owner) };
        let field = format!(
            "{}:{}{}",
            self.client.node_id(),
            owner.id(),
            K::FIELD_SUFFIX
        );
        let seq = at.seqs.next();
        let (task, mixed) = (at.task, self.args.kind == FleetKind::Mixed);
        let lease = self.lock_lease();
        let lease_end = lease.map(|lease| Instant::now() + lease);
        let acquire = async {
            let mut acquire = pin!(async {
                let wait = self.args.wait_ms.map(Duration::from_millis);
                match (wait, lease) {
                    (Some(wait), None) => lock.try_lock_for(wait).await,
                    (None, None) => lock.lock().await.map(Some),
                    (Some(wait), Some(lease)) => lock.try_lock_with_lease(wait, lease).await,
                    (None, Some(lease)) => lock.lock_with_lease(lease).await.map(Some),
                }
            });
            // Where barging kinds share the lock, its queue promises no order: nobody logs it.
            let outcome = tokio::select! {
                biased;
                outcome = &mut acquire => outcome,
                () = K::queued(&lock, &field), if !mixed => {
                    let _ = self.log.write(now_ns(), Event::Queued { task, seq });
                    acquire.await
                }
            };
            outcome.map(|guard| guard.map(|guard| LockHold::new(&lock, guard, mixed, lease_end)))
        };
        let attempted = Attempted {
            task,
            seq,
            name: lock.name(),
            wait_ms: self.args.wait_ms,
            mode: K::MODE,
            permits: 1,
            owner: Some(field.clone()),
            kind: Some(interface.to_owned()),
        };
        // A first hold with a fixed lease may be kept past it and replaced (`--replace-percent`).
        let again = (lease.is_some() && !at.reentry && percent(self.args.replace_percent))
            .then(|| at.again());
        let around = Around {
            again,
            ..Around::of(at)
        };
        if !self.attempt_with(attempted, acquire, around).await {
            return false;
        }
        if at.reentry || !self.args.try_after_release {
            return true;
        }
        let attempted = Attempted {
            task,
            seq: at.seqs.next(),
            name: lock.name(),
            wait_ms: Some(0),
            mode: K::MODE,
            permits: 1,
            owner: Some(field),
            kind: Some(interface.to_owned()),
        };
        let tried = async {
            let guard = lock.try_lock().await?;
            Ok::<_, Error>(guard.map(|guard| LockHold::new(&lock, guard, mixed, None)))
        };
        let _ = self.attempt_with(attempted, tried, Around::default()).await;
        true
    }

    /// One acquisition through `object` of the emulated Java client, by `thread`, as `at` says, as
    /// an attempt of its own; returns whether it held. A refused re-entry fails with
    /// `IllegalMonitorStateException`, logged as `reentry_refused`.
    async fn attempt_java(
        &self,
        at: Acquisition<'_>,
        kind: &dyn ObjectKind,
        java: &JavaClient,
        thread: ThreadId,
    ) -> bool {
        let object = kind.java(java, at.name);
        let field = java.lock_name(thread);
        let wait = self.args.wait_ms.map(Duration::from_millis);
        let lease = self.args.lease_ms.map(Duration::from_millis);
        let acquire = async {
            // The non-reentrant objects throw a `JavaError` already, the others a `RedisError`.
            let acquired = java_object!(&object, lock => as_java(match (wait, lease) {
                (Some(wait), lease) => lock.try_lock_for(thread, wait, lease).await,
                (None, Some(lease)) => lock.lock_with_lease(thread, lease).await.map(|()| true),
                (None, None) => lock.lock(thread).await.map(|()| true),
            }))?;
            Ok::<_, JavaError>(acquired.then(|| JavaHold {
                object: object.clone(),
                thread,
                field: field.clone(),
            }))
        };
        let attempted = Attempted {
            task: at.task,
            seq: at.seqs.next(),
            name: at.name,
            wait_ms: self.args.wait_ms,
            mode: Mode::Exclusive,
            permits: 1,
            owner: Some(field.clone()),
            kind: Some(format!("java {}", kind.interface())),
        };
        self.attempt_with(attempted, acquire, Around::of(at)).await
    }
}

/// The attempt numbers of one task, shared by the futures of its attempts (two futures of one
/// owner, re-entries).
#[derive(Default)]
struct Seqs(AtomicU64);

impl Seqs {
    /// The next attempt's number.
    fn next(&self) -> u64 {
        self.0.fetch_add(1, Ordering::Relaxed) + 1
    }
}

/// Who acquires.
#[derive(Clone, Copy)]
enum Who {
    /// An rlock owner: through handles bound to it, or (`scoped`) inside its `Owner::scope`.
    Owner { owner: Owner, scoped: bool },
    /// A thread of the emulated Java client (`--java`).
    Thread(ThreadId),
}

/// One acquisition of a lock by an owner, with the re-entries it makes once it holds.
#[derive(Clone, Copy)]
struct Acquisition<'a> {
    task: u32,
    seqs: &'a Seqs,
    name: &'a str,
    who: Who,
    /// How many re-entries it makes inside its hold, nested.
    depth: u32,
    /// It is itself a re-entry.
    reentry: bool,
    /// Told once it returned, held or not: the hold it re-enters or replaces waits for it.
    entered: Option<&'a Entered>,
}

impl<'a> Acquisition<'a> {
    /// A first acquisition of `name` by `who`, to be re-entered `depth` times.
    fn new(task: u32, seqs: &'a Seqs, name: &'a str, who: Who, depth: u32) -> Self {
        Self {
            task,
            seqs,
            name,
            who,
            depth,
            reentry: false,
            entered: None,
        }
    }

    /// The re-entry made inside its hold, if any: the same owner on the same name.
    fn inside(self) -> Option<Self> {
        let depth = self.depth.checked_sub(1)?;
        Some(Self {
            depth,
            reentry: true,
            entered: None,
            ..self
        })
    }

    /// A first acquisition by the same owner on the same name, which replaces its hold.
    fn again(self) -> Self {
        Self::new(self.task, self.seqs, self.name, self.who, 0)
    }

    /// The same, telling `entered` once it returned.
    fn entering(self, entered: &'a Entered) -> Self {
        Self {
            entered: Some(entered),
            ..self
        }
    }
}

/// Told once an acquisition returned, and whether it held.
#[derive(Default)]
struct Entered {
    returned: Notify,
    held: AtomicBool,
}

impl Entered {
    fn tell(&self, held: bool) {
        self.held.store(held, Ordering::Relaxed);
        self.returned.notify_one();
    }

    /// Waits until told; whether the acquisition held.
    async fn held(&self) -> bool {
        self.returned.notified().await;
        self.held.load(Ordering::Relaxed)
    }
}

/// What an attempt does around its hold, besides holding.
#[derive(Default)]
struct Around<'a> {
    /// The re-entry made inside the hold.
    inside: Option<Acquisition<'a>>,
    /// The acquisition that replaces the hold once its fixed lease ran out (`--replace-percent`).
    again: Option<Acquisition<'a>>,
    /// Told once the attempt returned, held or not (see [`Acquisition::entered`]).
    entered: Option<&'a Entered>,
}

impl<'a> Around<'a> {
    /// What `at` makes inside its hold and whom it tells.
    fn of(at: Acquisition<'a>) -> Self {
        Self {
            inside: at.inside(),
            again: None,
            entered: at.entered,
        }
    }
}

/// An attempt, as its `Started` record gives it.
struct Attempted<'a> {
    task: u32,
    seq: u64,
    name: &'a str,
    wait_ms: Option<u64>,
    mode: Mode,
    permits: u32,
    /// The hash field of its owner, for a lock.
    owner: Option<String>,
    /// The Redisson object it goes through, for a lock.
    kind: Option<String>,
}

/// Why an attempt or a release failed: rlock's error, or the emulated Java client's.
#[derive(Debug)]
enum Failure {
    Rlock(Error),
    Java(JavaError),
}

impl Failure {
    /// The kind of error, as the history counts it (see [`error_kind`]); a Java
    /// `IllegalMonitorStateException` from an acquisition is a refused re-entry.
    fn kind(&self) -> &'static str {
        match self {
            Self::Rlock(e) => error_kind(e),
            Self::Java(JavaError::IllegalMonitorState(_)) => "reentry_refused",
            Self::Java(JavaError::Redis(_)) => "backend",
        }
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Self::Rlock(e)
    }
}

impl From<JavaError> for Failure {
    fn from(e: JavaError) -> Self {
        Self::Java(e)
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Rlock(e) => e.fmt(f),
            Self::Java(e) => e.fmt(f),
        }
    }
}

/// What an emulated Java object's call threw, as a [`JavaError`] (a `RedisError`, or already one).
fn as_java<T, E>(result: Result<T, E>) -> Result<T, JavaError>
where
    JavaError: From<E>,
{
    result.map_err(JavaError::from)
}

/// Whether this one of a percentage of cases happens.
fn percent(percent: u8) -> bool {
    fastrand::u8(..100) < percent
}

/// What an attempt took, and how it is given back.
trait Held {
    /// What its `Acquired` record shows: a hash field, permit ids.
    fn field(&self) -> String;

    /// The fence taken first thing inside the hold: by default `INCR <name>:fence`, one counter
    /// for every kind and side on a name.
    async fn fence_in(&self, fences: &Fences, name: &str) -> Option<i64> {
        fences.incr(name).await
    }

    /// The fence read back last thing inside the hold: `GET <name>:fence`.
    async fn fence_out(&self, fences: &Fences, name: &str) -> Option<i64> {
        fences.get(name).await
    }

    /// Completes when the hold must end early, as it may be lost; never for what has no lease.
    async fn ends(&self) {
        std::future::pending().await
    }

    /// Whether it is known to be lost (its holder was told).
    fn is_lost(&self) -> bool {
        false
    }

    /// Whether it has a lost-lease signal of its own (`lease_lost()`), whose promise the log
    /// records (`Released`'s `signalled`).
    fn signals(&self) -> bool {
        false
    }

    /// When its fixed lease ends at the earliest, if it has one: its holder knows the hold is lost
    /// from then on, whatever its signal says.
    fn lease_end(&self) -> Option<Instant> {
        None
    }

    /// Gives it back; `Ok(true)` when that found it lost already.
    async fn release(self) -> Result<bool, Failure>;
}

/// A lock's hold.
struct LockHold<'a, K: LockKind> {
    lock: &'a Lock<K>,
    guard: Guard<K::Token>,
    /// Its fences are the `INCR` counter's whatever its kind's: other kinds share the name.
    shared_fence: bool,
    /// A fixed lease's end at the earliest (its attempt's start plus the lease).
    lease_end: Option<Instant>,
}

impl<'a, K: LockKind> LockHold<'a, K> {
    fn new(
        lock: &'a Lock<K>,
        guard: Guard<K::Token>,
        shared_fence: bool,
        lease_end: Option<Instant>,
    ) -> Self {
        Self {
            lock,
            guard,
            shared_fence,
            lease_end,
        }
    }
}

impl<K: Logged> Held for LockHold<'_, K> {
    fn field(&self) -> String {
        self.guard.field().to_owned()
    }

    async fn fence_in(&self, fences: &Fences, name: &str) -> Option<i64> {
        if self.shared_fence {
            return fences.incr(name).await;
        }
        K::fence_in(fences, self.lock, self.guard.token()).await
    }

    async fn fence_out(&self, fences: &Fences, name: &str) -> Option<i64> {
        if self.shared_fence {
            return fences.get(name).await;
        }
        K::fence_out(fences, self.lock).await
    }

    async fn ends(&self) {
        self.guard.lease_lost().await;
    }

    fn is_lost(&self) -> bool {
        self.guard.is_lease_lost()
    }

    fn signals(&self) -> bool {
        true
    }

    fn lease_end(&self) -> Option<Instant> {
        self.lease_end
    }

    async fn release(self) -> Result<bool, Failure> {
        self.guard.unlock().await?;
        Ok(false)
    }
}

/// A hold of the emulated Java client's thread.
struct JavaHold {
    object: JavaObject,
    thread: ThreadId,
    field: String,
}

impl Held for JavaHold {
    fn field(&self) -> String {
        self.field.clone()
    }

    /// Java's `unlock()`: `IllegalMonitorStateException` (here `None`) when the thread held nothing
    /// any more: its hold was lost.
    async fn release(self) -> Result<bool, Failure> {
        let thread = self.thread;
        let released = java_object!(&self.object, lock => lock.unlock(thread).await);
        Ok(released.map_err(JavaError::from)?.is_none())
    }
}

impl Held for SemaphorePermits {
    fn field(&self) -> String {
        format!("{} permits", self.permits())
    }

    async fn release(self) -> Result<bool, Failure> {
        SemaphorePermits::release(self).await?;
        Ok(false)
    }
}

/// Permits of an expirable semaphore, with the instant their lease may run out at the earliest.
struct ExpirablePermits {
    semaphore: PermitExpirableSemaphore,
    ids: Vec<PermitId>,
    until: Option<Instant>,
}

impl Held for ExpirablePermits {
    fn field(&self) -> String {
        let ids: Vec<String> = self.ids.iter().map(ToString::to_string).collect();
        ids.join(",")
    }

    async fn ends(&self) {
        match self.until {
            Some(until) => tokio::time::sleep_until(until).await,
            None => std::future::pending().await,
        }
    }

    /// All or none: none when one had expired (and was counted back in), its lease lost. A release
    /// by id can be sent again, as an application would after a lost reply (rlock reports it, as
    /// Redisson does, without sending it again): then none means they were released by the try
    /// whose reply was lost, unless their lease may have run out meanwhile.
    async fn release(self) -> Result<bool, Failure> {
        let mut tries = 0;
        loop {
            tries += 1;
            match self.semaphore.try_release_many(&self.ids).await {
                Ok(released) => {
                    let expired = self.until.is_some_and(|until| Instant::now() >= until);
                    return Ok(released != self.ids.len() && (tries == 1 || expired));
                }
                Err(e) if tries < RELEASE_TRIES && e.is_transient() => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => return Err(e.into()),
            }
        }
    }
}

/// How many times a worker sends the release of an expirable semaphore's permits whose reply was
/// lost: enough to outlast the outages of the fault scenarios.
const RELEASE_TRIES: u32 = 20;

/// A latch seen open: nothing to give back.
struct Opened;

impl Held for Opened {
    fn field(&self) -> String {
        "open".to_owned()
    }

    async fn release(self) -> Result<bool, Failure> {
        Ok(false)
    }
}

/// The values every `--synchronizer group` attempt takes of its group.
const GROUP_VALUES: [&str; 3] = ["a", "b", "c"];

/// A group lock's hold.
struct GroupHold {
    guard: GroupGuard,
}

impl Held for GroupHold {
    fn field(&self) -> String {
        self.guard.field().to_owned()
    }

    async fn ends(&self) {
        self.guard.lease_lost().await;
    }

    fn is_lost(&self) -> bool {
        self.guard.is_lease_lost()
    }

    async fn release(self) -> Result<bool, Failure> {
        self.guard.unlock().await?;
        Ok(false)
    }
}

/// A multi-lock's hold, with the field of its members on the worker's first client.
struct MultiHold {
    guard: MultiGuard,
    field: String,
}

impl Held for MultiHold {
    fn field(&self) -> String {
        self.field.clone()
    }

    async fn ends(&self) {
        self.guard.lease_lost().await;
    }

    fn is_lost(&self) -> bool {
        self.guard.is_lease_lost()
    }

    async fn release(self) -> Result<bool, Failure> {
        self.guard.unlock().await?;
        Ok(false)
    }
}

/// How a worker logs the holds of a lock kind: their mode, their fences, and whether a waiter is
/// queued.
trait Logged: LockKind + Sized {
    /// The mode its holds are logged with.
    const MODE: Mode = Mode::Exclusive;

    /// What its hash field adds to its owner's `<client id>:<owner id>`.
    const FIELD_SUFFIX: &'static str = "";

    /// The fence taken first thing inside a hold: by default `INCR <name>:fence`, one counter for
    /// every kind and side on a name.
    async fn fence_in(fences: &Fences, lock: &Lock<Self>, _token: &Self::Token) -> Option<i64> {
        fences.incr(lock.name()).await
    }

    /// The fence read back last thing inside a hold: `GET <name>:fence`.
    async fn fence_out(fences: &Fences, lock: &Lock<Self>) -> Option<i64> {
        fences.get(lock.name()).await
    }

    /// Completes once the waiting attempt through `lock` is surely in the lock's wait queue, as
    /// `queue_entry` (its owner's field); never for kinds without a queue.
    async fn queued(_lock: &Lock<Self>, _queue_entry: &str) {
        std::future::pending().await
    }
}

impl Logged for kind::Reentrant {}
impl Logged for kind::NonReentrant {}
impl Logged for kind::Spin {}
impl Logged for kind::Write {
    const FIELD_SUFFIX: &'static str = ":write";
}

impl Logged for kind::Read {
    const MODE: Mode = Mode::Read;
}

/// The fence of a fenced lock's hold is its own token, and the fence read back is the lock's latest
/// token: so the checker proves with the library's tokens what it proves with `INCR` for the other
/// kinds (unique, growing with time, unmoved inside a hold). Tokens are taken only by acquisitions,
/// when the lock is free, so none is taken inside a sound hold; an acquisition that was undone (a
/// dropped or failed attempt) still takes one, at such a moment.
impl Logged for kind::Fenced {
    async fn fence_in(_: &Fences, _: &Lock<Self>, token: &u64) -> Option<i64> {
        i64::try_from(*token).ok()
    }

    async fn fence_out(_: &Fences, lock: &Lock<Self>) -> Option<i64> {
        // A read that timed out tells nothing; one that answered ran inside the hold.
        let token = lock.token().await.ok()?;
        i64::try_from(token).ok()
    }
}

/// How often a fair-lock waiter looks for itself in the queue until it is seen there.
const QUEUE_POLL: Duration = Duration::from_millis(2);

/// The first acquire of a waiting fair-lock attempt queues it if the lock is busy, but its reply
/// (the TTL to wait) does not say so, and a `try_lock()` beforehand would not queue. So the attempt
/// reads the queue alongside its acquire until it sees its own entry there: that read ran after it
/// was queued, so the `Queued` record logged when it returns is never early (which the FIFO check
/// needs). The acquire runs on meanwhile; once seen, the reads stop. The same for every kind that
/// queues in the fair lock's queue.
async fn seen_queued<K: kind::FairQueue>(lock: &Lock<K>, queue_entry: &str) {
    loop {
        let queue = lock.queue().await.unwrap_or_default();
        if queue.iter().any(|waiter| waiter.field == queue_entry) {
            return;
        }
        tokio::time::sleep(QUEUE_POLL).await;
    }
}

impl Logged for kind::Fair {
    async fn queued(lock: &Lock<Self>, queue_entry: &str) {
        seen_queued(lock, queue_entry).await;
    }
}

impl Logged for kind::NonReentrantFair {
    async fn queued(lock: &Lock<Self>, queue_entry: &str) {
        seen_queued(lock, queue_entry).await;
    }
}

/// `INCR`/`GET` of `<name>:fence` on a connection of its own. Commands have **no** client-side
/// timeout: a fence command that timed out on our side could still run later, outside the hold, and
/// look like an intruder. The critical section waits for Redis instead (a broken connection still
/// fails at once and is re-opened for the next command).
struct Fences {
    client: redis::Client,
    conn: Mutex<Option<MultiplexedConnection>>,
}

impl Fences {
    fn new(url: &str) -> Self {
        Self {
            client: redis::Client::open(url).expect("a valid Redis URL"),
            conn: Mutex::new(None),
        }
    }

    async fn incr(&self, name: &str) -> Option<i64> {
        self.query(redis::cmd("INCR").arg(format!("{name}:fence")))
            .await
    }

    async fn get(&self, name: &str) -> Option<i64> {
        self.query(redis::cmd("GET").arg(format!("{name}:fence")))
            .await
    }

    async fn query(&self, cmd: &redis::Cmd) -> Option<i64> {
        let mut conn = self.connection().await?;
        match cmd.query_async(&mut conn).await {
            Ok(value) => Some(value),
            Err(_) => {
                *self.conn.lock().await = None;
                None
            }
        }
    }

    async fn connection(&self) -> Option<MultiplexedConnection> {
        let mut slot = self.conn.lock().await;
        if slot.is_none() {
            let config = redis::AsyncConnectionConfig::new()
                .set_connection_timeout(Some(Duration::from_secs(1)))
                .set_response_timeout(None);
            *slot = self
                .client
                .get_multiplexed_async_connection_with_config(&config)
                .await
                .ok();
        }
        slot.clone()
    }
}

/// `ms` milliseconds ±50 %.
fn jitter(ms: u64) -> Duration {
    Duration::from_micros(ms * 500 + fastrand::u64(..=ms * 1000))
}

/// Completes when standard input reaches its end: the harness is done with us (or died).
fn stdin_closed() -> tokio::sync::oneshot::Receiver<()> {
    let (closed, receiver) = tokio::sync::oneshot::channel();
    let _ = std::thread::spawn(move || {
        let mut sink = Vec::new();
        let _ = std::io::stdin().lock().read_to_end(&mut sink);
        let _ = closed.send(());
    });
    receiver
}

fn summarize(files: &[PathBuf]) -> ExitCode {
    let mut total: Option<Summary> = None;
    for path in files {
        let file = match std::fs::File::open(path) {
            Ok(file) => file,
            Err(e) => {
                eprintln!("rlock-torture: cannot read {}: {e}", path.display());
                return ExitCode::FAILURE;
            }
        };
        for line in std::io::BufReader::new(file).lines() {
            let Ok(line) = line else { continue };
            match serde_json::from_str::<Summary>(&line) {
                Ok(summary) => match total.as_mut() {
                    Some(total) => total.merge(&summary),
                    None => total = Some(summary),
                },
                Err(e) => eprintln!("rlock-torture: skipping a malformed summary: {e}"),
            }
        }
    }
    let Some(total) = total else {
        eprintln!("rlock-torture: no summaries found");
        return ExitCode::FAILURE;
    };
    print!("{}", render(&total));
    let bad = total.overlaps
        + total.overtakes
        + total.starved
        + total.panics
        + total.inconsistencies
        + total.leaked_holds
        + total.double_applies
        + total.failover_lost;
    if bad == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// The totals as a small text table.
fn render(total: &Summary) -> String {
    let mut out = String::new();
    let mut row = |what: &str, value: String| out.push_str(&format!("  {what:<48} {value}\n"));
    row("scenario runs", total.runs.to_string());
    row("worker processes", total.processes.to_string());
    row("acquisition attempts", total.attempts.to_string());
    row("acquisitions checked", total.acquisitions.to_string());
    row(
        "  of which re-entered by their owner (nested, two futures)",
        total.reentered_holds.to_string(),
    );
    row("bounded waits that ran out", total.gave_up.to_string());
    for (kind, n) in &total.errors {
        row(&format!("attempts failed: {kind}"), n.to_string());
    }
    for (kind, n) in &total.faults {
        row(&format!("fault: {kind}"), n.to_string());
    }
    row(
        "holders told their lease was lost",
        total.lease_losses.to_string(),
    );
    row(
        "unsafe windows (overlaps after a signalled lease loss)",
        format!(
            "{} ({} overlapping holds)",
            total.unsafe_windows, total.holds_in_unsafe_windows
        ),
    );
    row(
        "overlaps outside signalled lease loss",
        total.overlaps.to_string(),
    );
    row(
        "fair-lock acquisitions out of queue order",
        total.overtakes.to_string(),
    );
    row(
        "attempts or holds that never completed",
        total.starved.to_string(),
    );
    row("panics", total.panics.to_string());
    row("inconsistent histories", total.inconsistencies.to_string());
    row("leaked holds", total.leaked_holds.to_string());
    row("double-applied acquires", total.double_applies.to_string());
    row("local hand-offs counted", total.hand_offs.to_string());
    row(
        "free hand-offs (reported by finished workers)",
        total.free_hand_offs.to_string(),
    );
    row(
        "streaks of free hand-offs (reported likewise)",
        total.hand_off_streaks.to_string(),
    );
    row(
        "permits lost to killed holders (given back)",
        total.permits_lost_to_killed_holders.to_string(),
    );
    row(
        "holds across a failover that a replica acknowledged",
        total.failover_kept.to_string(),
    );
    row(
        "holds across a failover it may lose (unacknowledged)",
        total.failover_losable.to_string(),
    );
    row(
        "acknowledged holds told lost after a failover",
        total.failover_lost.to_string(),
    );
    for (name, ms) in &total.figures {
        row(name, format!("{ms:.1}"));
    }
    out
}
