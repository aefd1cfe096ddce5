//! `rlock-torture`: the worker process of the reliability suite, and the summariser of its figures.
//!
//! ```text
//! rlock-torture work --url URL --process NAME --log FILE --names a,b [--tasks 3] [--run-ms 2000]
//!                    [--hold-ms 5] [--think-ms 2] [--watchdog-ms 1000] [--command-timeout-ms 300]
//!                    [--pool-size 4] [--wait-ms W] [--cancel-percent P] [--cancel-within-us 3000]
//!                    [--kind lock|fair|spin|fenced|read|write|rw] [--fair-wait-timeout-ms 5000]
//!                    [--topology single|master-replica|sentinel|cluster] [--nodes URL,...]
//!                    [--nat-map HOST:PORT=HOST:PORT,...] [--master-name NAME] [--fence-url URL]
//!                    [--no-local-handoff] [--local-handoff-window-ms MS] [--no-replica-acks]
//!                    [--steady-hold]
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
//! `--steady-hold` makes every hold last exactly `--hold-ms` (by default ±50 %).
//! `--no-replica-acks` turns `check_lock_synced_replicas` off: in a replicated topology, lock writes
//! then return whether or not a replica acknowledged them (the worker logs which, for failovers).
//! When done it logs `finished` and keeps its client alive until its standard input closes, so the
//! harness can check Redis for left-over holds while the client could still be renewing them.
//!
//! `summarize` adds up the JSON summaries (one per line) that the fault scenarios append to
//! `$RLOCK_FAULTS_REPORT`, and prints the totals.

use std::io::{BufRead, Read};
use std::path::PathBuf;
use std::pin::pin;
use std::process::ExitCode;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use clap::{Parser, Subcommand};
use redis::aio::MultiplexedConnection;
use rlock_redisson::kind::{self, LockKind};
use rlock_redisson::{Client, Config, Error, Guard, Lock, Owner};
use rlock_tests::history::fleet::Kind;
use rlock_tests::history::{Event, LogWriter, Mode, Summary, error_kind, now_ns};
use tokio::sync::Mutex;
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
    kind: Kind,
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
    /// The client's configuration, before the tunables.
    fn config(&self) -> Config {
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
    fences: Fences,
    log: Arc<LogWriter>,
}

impl Worker {
    async fn run(args: WorkArgs, log: Arc<LogWriter>) -> ExitCode {
        let mut config = args.config();
        config.watchdog_timeout = Duration::from_millis(args.watchdog_ms);
        config.command_timeout = Duration::from_millis(args.command_timeout_ms);
        config.pool_size = args.pool_size;
        config.retry_delay = Duration::from_millis(100);
        config.retry_max_delay = Duration::from_millis(200);
        config.fair_lock_wait_timeout = Duration::from_millis(args.fair_wait_timeout_ms);
        config.local_handoff = !args.no_local_handoff;
        if let Some(window) = args.local_handoff_window_ms {
            config.local_handoff_window = Duration::from_millis(window);
        }
        config.check_lock_synced_replicas = !args.no_replica_acks;
        let replicated = !matches!(args.topology, TopologyArg::Single);
        let client = match Client::with_config(config).await {
            Ok(client) => client,
            Err(e) => {
                eprintln!("rlock-torture {}: cannot connect: {e}", args.process);
                return ExitCode::FAILURE;
            }
        };
        let _ = log.write_now(Event::Ready {
            node_id: client.node_id().to_owned(),
        });
        if replicated {
            let _ = log.write_now(Event::ReplicaAcks {
                required: !args.no_replica_acks,
            });
        }
        let worker = Arc::new(Self {
            fences: Fences::new(args.fence_url.as_deref().unwrap_or(&args.url)),
            args,
            client,
            log,
        });
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
        let _ = worker.log.write_now(Event::Finished { unfinished });
        let _ = tokio::time::timeout(MAX_LINGER, stdin_closed).await;
        ExitCode::SUCCESS
    }

    /// Acquires, holds and releases random locks until `deadline`.
    async fn task(self: Arc<Self>, task: u32, deadline: Instant) {
        let mut seq = 0;
        while Instant::now() < deadline {
            seq += 1;
            let name = &self.args.names[fastrand::usize(..self.args.names.len())];
            self.attempt(task, seq, name).await;
            tokio::time::sleep(jitter(self.args.think_ms)).await;
        }
    }

    /// One attempt on lock `name` of the worker's kind.
    async fn attempt(&self, task: u32, seq: u64, name: &str) {
        let client = &self.client;
        match self.args.kind {
            Kind::Lock => self.attempt_on(task, seq, client.lock(name)).await,
            Kind::Fair => self.attempt_on(task, seq, client.fair_lock(name)).await,
            Kind::Spin => self.attempt_on(task, seq, client.spin_lock(name)).await,
            Kind::Fenced => self.attempt_on(task, seq, client.fenced_lock(name)).await,
            Kind::Read | Kind::Write | Kind::Rw => {
                let lock = client.read_write_lock(name);
                let read = match self.args.kind {
                    Kind::Read => true,
                    Kind::Write => false,
                    _ => fastrand::bool(),
                };
                if read {
                    self.attempt_on(task, seq, lock.read()).await;
                } else {
                    self.attempt_on(task, seq, lock.write()).await;
                }
            }
        }
    }

    async fn attempt_on<K: Logged>(&self, task: u32, seq: u64, lock: Lock<K>) {
        let log = |at_ns, event| {
            let _ = self.log.write(at_ns, event);
        };
        // A fresh owner, as an unbound handle would use, but known in advance: a fair-lock waiter
        // looks for it in the queue.
        let owner = Owner::new();
        let lock = lock.with_owner(owner);
        log(
            now_ns(),
            Event::Started {
                task,
                seq,
                name: lock.name().to_owned(),
                wait_ms: self.args.wait_ms,
                mode: K::MODE,
                permits: 1,
            },
        );
        let acquire = async {
            let mut acquire = pin!(async {
                match self.args.wait_ms {
                    Some(wait) => lock.try_lock_for(Duration::from_millis(wait)).await,
                    None => lock.lock().await.map(Some),
                }
            });
            let queue_entry = format!("{}:{}", self.client.node_id(), owner.id());
            tokio::select! {
                biased;
                outcome = &mut acquire => outcome,
                () = K::queued(&lock, &queue_entry) => {
                    log(now_ns(), Event::Queued { task, seq });
                    acquire.await
                }
            }
        };
        let outcome = if fastrand::u8(..100) < self.args.cancel_percent {
            let budget = Duration::from_micros(fastrand::u64(..=self.args.cancel_within_us));
            tokio::time::timeout(budget, acquire).await.ok()
        } else {
            Some(acquire.await)
        };
        let returned_at = now_ns();
        match outcome {
            Some(Ok(Some(guard))) => self.hold(task, seq, &lock, guard, returned_at).await,
            Some(Ok(None)) => log(returned_at, Event::GaveUp { task, seq }),
            Some(Err(e)) => {
                log(
                    returned_at,
                    Event::Failed {
                        task,
                        seq,
                        error: error_kind(&e).to_owned(),
                        message: e.to_string(),
                    },
                );
                // Redis is in trouble: do not spin.
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            None => log(returned_at, Event::Cancelled { task, seq }),
        }
    }

    /// How long the next hold lasts.
    fn hold_time(&self) -> Duration {
        if self.args.steady_hold {
            Duration::from_millis(self.args.hold_ms)
        } else {
            jitter(self.args.hold_ms)
        }
    }

    /// The critical section: fence in, hold (stopping early if the lease is lost), fence out, unlock.
    async fn hold<K: Logged>(
        &self,
        task: u32,
        seq: u64,
        lock: &Lock<K>,
        guard: Guard<K::Token>,
        acquired_at: u64,
    ) {
        let fence = K::fence_in(&self.fences, lock, guard.token()).await;
        let _ = self.log.write(
            acquired_at,
            Event::Acquired {
                task,
                seq,
                fence,
                field: guard.field().to_owned(),
            },
        );
        let lost_inside = tokio::select! {
            () = tokio::time::sleep(self.hold_time()) => false,
            () = guard.lease_lost() => true,
        };
        let fence_after = K::fence_out(&self.fences, lock).await;
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
        let lost_before = lost_inside || guard.is_lease_lost();
        let unlocking = Instant::now();
        let unlocked = guard.unlock().await;
        let unlock_ms = u64::try_from(unlocking.elapsed().as_millis()).unwrap_or(u64::MAX);
        let (lease_lost, unlock_error) = match &unlocked {
            Ok(()) => (lost_before, None),
            Err(e @ Error::LeaseLost { .. }) => (true, Some(error_kind(e).to_owned())),
            Err(e) => (lost_before, Some(error_kind(e).to_owned())),
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
            },
        );
    }
}

/// How a worker logs the holds of a lock kind: their mode, their fences, and whether a waiter is
/// queued.
trait Logged: LockKind + Sized {
    /// The mode its holds are logged with.
    const MODE: Mode = Mode::Exclusive;

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
impl Logged for kind::Spin {}
impl Logged for kind::Write {}

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
/// needs). The acquire runs on meanwhile; once seen, the reads stop.
impl Logged for kind::Fair {
    async fn queued(lock: &Lock<Self>, queue_entry: &str) {
        loop {
            let queue = lock.queue().await.unwrap_or_default();
            if queue.iter().any(|waiter| waiter.field == queue_entry) {
                return;
            }
            tokio::time::sleep(QUEUE_POLL).await;
        }
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
