//! The services every lock kind runs on: command connections, the subscriber, the watchdog, the
//! background task tracker and the client's node id. The engine takes these, never the whole
//! [`Client`](crate::Client), so the arrows run one way: client → kinds → engine → services.

use tokio_util::sync::{CancellationToken, DropGuard};
use tokio_util::task::TaskTracker;

use crate::config::{Config, ShardedPubSub, Topology, redact};
use crate::connection::Commands;
use crate::engine::{Holds, Latches};
use crate::error::{Error, Operation, Result};
use crate::owner::{self, Owner};
use crate::pubsub::Subscriber;
use crate::watchdog::Watchdog;

/// One client's services, shared (behind an `Arc`) by the client, its lock handles and its guards.
/// The background tasks stop when the last of them is dropped.
pub(crate) struct Services {
    pub(crate) config: Config,
    pub(crate) node_id: String,
    /// `PUBLISH`, or `SPUBLISH` in a cluster with sharded pub/sub.
    pub(crate) publish: &'static str,
    pub(crate) commands: Commands,
    pub(crate) subscriber: Subscriber,
    pub(crate) watchdog: Watchdog,
    pub(crate) holds: Holds,
    pub(crate) latches: Latches,
    /// Where releases and undos run after their caller has gone.
    pub(crate) background: Background,
    _shutdown: DropGuard,
}

impl Services {
    /// Connects and starts the subscriber and the watchdog. Fails fast (with a `PING`) when Redis is
    /// unreachable.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: services that were never returned stop their background tasks.
    pub(crate) async fn start(config: Config) -> Result<Self> {
        config.validate()?;
        // TLS (`rediss://`) needs a process-wide crypto provider; another one may already be set.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| Error::InvalidArgument("rlock::Client needs a tokio runtime".into()))?;
        let commands = Commands::new(&config)?;
        let shutdown = CancellationToken::new();
        let guard = shutdown.clone().drop_guard();
        let _: String = commands
            .query(Operation::Connect, "", &redis::cmd("PING"))
            .await?;
        // Publish and subscribe exactly as Redisson does (PROTOCOL.md §2.6), so Java hears us.
        let sharded = match (&config.topology, config.sharded_pubsub) {
            (Topology::Cluster, ShardedPubSub::On) => true,
            (Topology::Cluster, ShardedPubSub::Auto) => commands
                .query::<redis::Value>(
                    Operation::Connect,
                    "",
                    redis::cmd("PUBSUB").arg("SHARDNUMSUB"),
                )
                .await
                .is_ok(),
            _ => false,
        };
        let subscriber = Subscriber::start(&config, sharded, &runtime, shutdown.child_token())
            .map_err(|source| Error::Backend {
                operation: Operation::Connect,
                source,
            })?;
        let watchdog = Watchdog::start(&config, commands.clone(), &runtime, shutdown.child_token());
        let node_id = uuid::Uuid::new_v4().to_string();
        tracing::debug!(url = %redact(&config.url), %node_id, "rlock client connected");
        Ok(Self {
            config,
            node_id,
            publish: if sharded { "SPUBLISH" } else { "PUBLISH" },
            commands,
            subscriber,
            watchdog,
            holds: Holds::default(),
            latches: Latches::default(),
            background: Background {
                runtime,
                tracker: TaskTracker::new(),
            },
            _shutdown: guard,
        })
    }

    /// The hash field of `owner` on this client: `<node-uuid>:<owner-id>`.
    pub(crate) fn field(&self, owner: Owner) -> String {
        owner::field(&self.node_id, owner)
    }
}

/// Spawns the work that must finish even when its caller is gone (a dropped guard's release, a
/// cancelled acquire's undo), on the client's runtime, tracked so [`Client::close`] can wait for it.
///
/// [`Client::close`]: crate::Client::close
#[derive(Clone, Debug)]
pub(crate) struct Background {
    runtime: tokio::runtime::Handle,
    tracker: TaskTracker,
}

impl Background {
    pub(crate) fn spawn<F>(&self, work: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: std::future::Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.tracker.spawn_on(work, &self.runtime)
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
