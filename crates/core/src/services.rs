//! The services every lock kind runs on: the configuration and the client's node id, command
//! connections, the subscriber, the watchdog, the ledger of the holds this client knows of, the
//! reconciliations in flight, the local hand-off queues, the unlock latches to delete, the
//! background task tracker and the telemetry handles. The engine takes these, never the whole
//! [`Client`](crate::Client), so the arrows run one way: client → kinds → engine → services.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use tokio_util::sync::{CancellationToken, DropGuard};
use tokio_util::task::TaskTracker;

use crate::cohort::Cohorts;
use crate::config::{Config, ShardedPubSub, Topology, redact};
use crate::connection::{self, Commands, Deployment};
use crate::error::{Error, Operation, Result, Subject};
use crate::ledger::Ledger;
use crate::owner::{self, Owner};
use crate::pubsub::Subscriber;
use crate::reconciling::Reconciling;
use crate::telemetry::{self, Telemetry};
use crate::watchdog::Watchdog;

/// One client's services, shared (behind an `Arc`) by the client, its lock handles and its guards.
/// The background tasks stop when the last of them is dropped.
pub struct Services {
    pub(crate) config: Config,
    pub(crate) node_id: String,
    /// `PUBLISH`, or `SPUBLISH` in a cluster with sharded pub/sub.
    pub(crate) publish: &'static str,
    pub(crate) commands: Commands,
    pub(crate) subscriber: Subscriber,
    pub(crate) watchdog: Watchdog,
    /// The holds this client has seen confirmed: one record per owner's hold.
    pub(crate) ledger: Ledger,
    /// Reconciliations (undos of acquires whose replies were lost) that may still run.
    pub(crate) reconciling: Arc<Reconciling>,
    /// Releases of the kinds that refuse re-entry that run in the background (a dropped guard's)
    /// and have not ended: the owner's next acquisition of that lock waits for them, or it would be
    /// refused as a re-entry.
    pub(crate) releasing: Arc<Reconciling>,
    /// Local wait queues and hand-off of the exclusive kinds.
    pub(crate) cohorts: Cohorts,
    /// Unlock latches whose replies are in hand, deleted in batches.
    pub(crate) latches: SpentLatches,
    /// Where releases and undos run after their caller has gone.
    pub(crate) background: Background,
    /// Metric handles of acquisitions and holds.
    pub(crate) telemetry: Telemetry,
    _shutdown: DropGuard,
}

impl std::fmt::Debug for Services {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Services")
            .field("node_id", &self.node_id)
            .finish_non_exhaustive()
    }
}

impl Services {
    /// Connects and starts the subscriber and the watchdog. Fails fast (with a `PING`) when Redis
    /// is unreachable, and when it refuses what locks need (see [`connection::probe::probe`]).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: services that were never returned stop their background tasks.
    pub(crate) async fn start(config: Config) -> Result<Self> {
        config.validate()?;
        let deployment = Deployment::of(&config)?;
        // TLS (`rediss://`) needs a process-wide crypto provider; another one may already be set.
        #[cfg(feature = "tls")]
        let _ = rustls::crypto::ring::default_provider().install_default();
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| {
            Error::InvalidArgument("rlock_redisson::Client needs a tokio runtime".into())
        })?;
        let mut commands = Commands::new(&config, deployment)?;
        let shutdown = CancellationToken::new();
        let guard = shutdown.clone().drop_guard();
        let _: String = commands
            .query(Operation::Connect, Subject::CLIENT, &redis::cmd("PING"))
            .await?;
        connection::probe::probe(&mut commands, &config).await?;
        // Publish and subscribe exactly as Redisson does (docs/protocol.md §2.6), so Java hears us.
        let sharded = match (&config.topology, config.sharded_pubsub) {
            (Topology::Cluster, ShardedPubSub::On) => true,
            (Topology::Cluster, ShardedPubSub::Auto) => commands
                .query::<redis::Value>(
                    Operation::Connect,
                    Subject::CLIENT,
                    redis::cmd("PUBSUB").arg("SHARDNUMSUB"),
                )
                .await
                .is_ok(),
            _ => false,
        };
        let subscriber = Subscriber::start(
            &config,
            deployment,
            sharded,
            commands.clone(),
            &runtime,
            shutdown.child_token(),
        )
        .map_err(|source| Error::backend(Operation::Connect, Subject::CLIENT, source))?;
        let watchdog = Watchdog::start(&config, commands.clone(), &runtime, shutdown.child_token());
        let node_id = uuid::Uuid::new_v4().to_string();
        tracing::debug!(url = %redact(&config.url), %node_id, "rlock client connected");
        let telemetry = Telemetry::new(config.metrics_lock_names);
        let ledger = Ledger::new(config.metrics_lock_names);
        Ok(Self {
            config,
            node_id,
            publish: if sharded { "SPUBLISH" } else { "PUBLISH" },
            commands,
            subscriber,
            watchdog,
            ledger,
            reconciling: Arc::default(),
            releasing: Arc::default(),
            cohorts: Cohorts::default(),
            latches: SpentLatches::default(),
            background: Background::new(runtime),
            telemetry,
            _shutdown: guard,
        })
    }

    /// The hash field of `owner` on this client: `<node-uuid>:<owner-id>`.
    pub(crate) fn field(&self, owner: Owner) -> String {
        owner::field(&self.node_id, owner)
    }
}

/// Spawns the work that must finish even when its caller is gone (a dropped guard's release, a
/// cancelled acquire's undo), on the client's runtime, tracked so [`Client::close`] can wait for
/// it.
///
/// Nothing cancels that work but the runtime shutting down (a program returning from `main`, a
/// blocking client dropped) before it ran: then a hold stays in Redis until its lease runs out.
/// Each such task is counted, and the first one of a client says so in a warning that names the
/// cure, [`Client::close`].
///
/// [`Client::close`]: crate::Client::close
#[derive(Clone, Debug)]
pub(crate) struct Background {
    runtime: tokio::runtime::Handle,
    tracker: TaskTracker,
    /// Whether this client already warned about work the runtime's shutdown abandoned.
    warned: Arc<AtomicBool>,
}

impl Background {
    fn new(runtime: tokio::runtime::Handle) -> Self {
        Self {
            runtime,
            tracker: TaskTracker::new(),
            warned: Arc::default(),
        }
    }

    /// Spawns work that leaves something held in Redis if it never runs (a release, an undo).
    pub(crate) fn spawn<F>(&self, work: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: std::future::Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let unfinished = Unfinished(Some(self.warned.clone()));
        self.tracker.spawn_on(
            async move {
                let output = work.await;
                unfinished.finished();
                output
            },
            &self.runtime,
        )
    }

    /// Spawns a watch that ends with what it watches (a streak of free hand-offs), untracked: a
    /// [`Client::close`](crate::Client::close) while a hold is still lent must not wait for it.
    pub(crate) fn spawn_watch(&self, work: impl std::future::Future<Output = ()> + Send + 'static) {
        drop(self.runtime.spawn(work));
    }

    /// Spawns tidying that may be lost without harm (deleting unlock latches, which expire anyway).
    fn spawn_tidying(&self, work: impl std::future::Future<Output = ()> + Send + 'static) {
        drop(self.tracker.spawn_on(work, &self.runtime));
    }

    /// Waits until every task spawned so far has finished; spawning stays possible.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only waits.
    pub(crate) async fn settle(&self) {
        let _ = self.tracker.close();
        self.tracker.wait().await;
        let _ = self.tracker.reopen();
    }
}

/// Armed while a background task runs: dropped armed, the task was dropped before it finished.
struct Unfinished(Option<Arc<AtomicBool>>);

impl Unfinished {
    fn finished(mut self) {
        self.0 = None;
    }
}

impl Drop for Unfinished {
    fn drop(&mut self) {
        if let Some(warned) = self.0.take() {
            telemetry::abandoned(!warned.swap(true, Ordering::Relaxed));
        }
    }
}

/// How long an unlock latch whose reply is in hand waits to be deleted with the others.
const LATCH_BATCH_DELAY: Duration = Duration::from_millis(100);

/// Unlock latches whose replies are in hand, deleted together a moment later (one `DEL` per slot
/// where a command may not cross slots). Deleting each one on its own, as Redisson does, costs a
/// command, a task and a wake-up per unlock; nothing reads a latch after its reply was seen, and
/// each also expires by itself.
#[derive(Debug, Default)]
pub(crate) struct SpentLatches(Arc<Mutex<Vec<String>>>);

impl Services {
    /// Deletes an unlock latch once its reply is in hand (best effort, in the background, batched).
    pub(crate) fn forget_latch(&self, latch: String) {
        let first = {
            let mut pending = self.latches.0.lock();
            pending.push(latch);
            pending.len() == 1
        };
        if !first {
            return;
        }
        let pending = self.latches.0.clone();
        let commands = self.commands.clone();
        self.background.spawn_tidying(async move {
            tokio::time::sleep(LATCH_BATCH_DELAY).await;
            let latches = std::mem::take(&mut *pending.lock());
            let mut by_slot: HashMap<_, Vec<String>> = HashMap::new();
            for latch in latches {
                by_slot
                    .entry(commands.batch_slot(&latch))
                    .or_default()
                    .push(latch);
            }
            for latches in by_slot.into_values() {
                let _ = commands
                    .query::<()>(
                        Operation::Unlock,
                        Subject::CLIENT,
                        redis::cmd("DEL").arg(&latches),
                    )
                    .await;
            }
        });
    }
}
