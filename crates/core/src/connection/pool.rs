//! The pooled connection, and the deadpool manager that opens it and retires it.
//!
//! The pool is deadpool's managed pool with rlock's own manager rather than deadpool-redis's, for two
//! reasons that matter to a lock: deadpool-redis recycles with a `PING` on every checkout (an extra
//! round trip per lock operation), and it opens connections with redis-rs's default 500 ms response
//! timeout, which would cut a 1 s `WAIT` short and turn it into an error whose outcome looks known.
//! Here rlock owns every deadline, recycling is free, and every connection opened before the last
//! connection failure is retired: one broken connection (or a master turned replica after a failover)
//! usually means its siblings are stale too. A request that misses its deadline retires its own
//! connection: replies come in order, so a stuck request would hold up everything sent after it on
//! that connection (seen after a Sentinel failover: a `WAIT` on the promoted master never
//! returned); its siblings, whose replies come, stay.
//!
//! Each connection has its in-flight slots ([`InFlight`]): a request is written only once it holds
//! one, and its deadline starts then, so that a burst of requests queues here, fairly and known
//! unsent, rather than inside the connection under the deadlines of requests not yet written. The
//! attempts of wait-forever acquisitions hold at most 40 of the 50 at once: a burst of them, which
//! may be any size, never stands between the unlocks, releases and renewals behind it and Redis.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use deadpool::managed::{self, Metrics, RecycleError, RecycleResult};
use redis::aio::{ConnectionLike, MultiplexedConnection};
#[cfg(feature = "cluster")]
use redis::cluster_async::ClusterConnection;
#[cfg(feature = "cluster")]
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, Slot, SlotAddr};
use redis::{Cmd, Pipeline, RedisError, RedisFuture, RedisResult, Value};

#[cfg(feature = "cluster")]
use super::clients::cluster_builder;
#[cfg(feature = "sentinel")]
use super::clients::sentinel_client;
use super::clients::{Rotating, node_client};
#[cfg(feature = "cluster")]
use super::cluster;
use super::deployment::Deployment;
use crate::config::{Config, redact};
use crate::error::{Error, Operation, Result, Subject};

/// How many requests one connection carries at once. redis-rs queues up to 50 requests per
/// connection before its driver writes them: with no more in flight than that, a request that
/// holds a slot is written at once, and its deadline measures the server and the network.
const IN_FLIGHT_PER_CONNECTION: usize = 50;

/// How many of a connection's slots the attempts of wait-forever acquisitions may hold at once
/// ([`Queueing::Unbounded`]). The others stay free for what must get through behind a burst of
/// them, and waits only for its own kind: the releases, unlocks and renewals that free or keep
/// what the burst waits for, and every request whose wait for a slot is bounded.
pub(super) const UNBOUNDED_PER_CONNECTION: usize = 40;

/// The in-flight slots of one pooled connection, and whether a request on it missed its deadline
/// (then the pool retires it at the next checkout).
#[derive(Debug)]
pub(crate) struct InFlight {
    pub(super) slots: tokio::sync::Semaphore,
    /// The turns of [`Queueing::Unbounded`] requests, taken before a slot: a burst of them queues
    /// here rather than ahead of other requests for `slots`.
    pub(super) unbounded: tokio::sync::Semaphore,
    pub(super) late: std::sync::atomic::AtomicBool,
}

impl Default for InFlight {
    fn default() -> Self {
        Self {
            slots: tokio::sync::Semaphore::new(IN_FLIGHT_PER_CONNECTION),
            unbounded: tokio::sync::Semaphore::new(UNBOUNDED_PER_CONNECTION),
            late: std::sync::atomic::AtomicBool::new(false),
        }
    }
}

/// A checked-out command connection: a handle on one pooled multiplexed connection.
///
/// The pool slot is given back as soon as the handle is taken: a multiplexed connection carries
/// any number of concurrent requests, and holding the slot for a whole round trip would cap the
/// client at `pool_size` requests in flight. The handle still names one connection, so requests
/// sent on it (an acquire, then its undo) reach Redis in order.
#[derive(Clone, Debug)]
pub(crate) struct Connection {
    pub(crate) conn: Conn,
    /// The connection failures counted when it was opened: once more have been, the pool retires it.
    pub(super) generation: u64,
    /// Its in-flight slots, shared by every handle on it.
    pub(super) in_flight: Arc<InFlight>,
    /// How long a request on this handle may wait for one of those slots.
    pub(super) queueing: Queueing,
    /// Whether the last request on this handle got its slot, and so may have been written.
    pub(super) sent: bool,
}

impl Connection {
    /// This handle, its requests waiting for an in-flight slot as `queueing` says.
    pub(crate) fn queueing(mut self, queueing: Queueing) -> Self {
        self.queueing = queueing;
        self
    }

    /// Whether the last request on this handle may have been written: `false` when it was given up
    /// (or dropped) while it waited for its in-flight slot, so that it needs no undo.
    pub(crate) fn sent(&self) -> bool {
        self.sent
    }
}

/// How long a request waits for an in-flight slot on its connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Queueing {
    /// At most the command timeout: past it the request fails with a timeout, known unsent.
    Bounded,
    /// As long as it takes: the attempts of a wait-forever acquisition, which the client's own
    /// load must never fail.
    Unbounded,
}

/// One command connection of any topology.
#[derive(Clone)]
pub(crate) enum Conn {
    /// A server: the single server, the master, or the master Sentinel names.
    Node(MultiplexedConnection),
    /// A cluster: routes each command by its key's slot.
    #[cfg(feature = "cluster")]
    Cluster(ClusterConnection),
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Self::Node(conn) => conn.req_packed_command(cmd),
            #[cfg(feature = "cluster")]
            Self::Cluster(conn) => Box::pin(cluster::command(conn, cmd)),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Self::Node(conn) => conn.req_packed_commands(pipeline, offset, count),
            #[cfg(feature = "cluster")]
            Self::Cluster(conn) => Box::pin(cluster::pipeline(conn, pipeline, offset, count, None)),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Node(conn) => conn.get_db(),
            #[cfg(feature = "cluster")]
            Self::Cluster(conn) => conn.get_db(),
        }
    }
}

impl Conn {
    /// Runs `pipeline` on the master that owns `key` (the only node for non-cluster connections).
    #[cfg_attr(not(feature = "cluster"), allow(unused_variables))]
    pub(super) async fn on_master_of(
        &mut self,
        key: &str,
        pipeline: Pipeline,
    ) -> RedisResult<Vec<Value>> {
        match self {
            Self::Node(conn) => pipeline.query_async(conn).await,
            #[cfg(feature = "cluster")]
            Self::Cluster(conn) => {
                let count = pipeline.len();
                let route = Route::with_slot(Slot::for_key(key), SlotAddr::Master);
                let route = SingleNodeRoutingInfo::SpecificNode(route);
                cluster::pipeline(conn, &pipeline, 0, count, Some(&route)).await
            }
        }
    }

    /// `INFO replication` of the master that owns `key`.
    #[cfg_attr(not(feature = "cluster"), allow(unused_variables))]
    pub(super) async fn replication_info(&mut self, key: &str) -> RedisResult<String> {
        let mut info = redis::cmd("INFO");
        let _ = info.arg("replication");
        let reply = match self {
            Self::Node(conn) => info.query_async(conn).await?,
            #[cfg(feature = "cluster")]
            Self::Cluster(conn) => {
                let route = Route::with_slot(Slot::for_key(key), SlotAddr::Master);
                conn.route_command(
                    info,
                    RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(route)),
                )
                .await?
            }
        };
        redis::from_redis_value(reply).map_err(Into::into)
    }
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Node(_) => "Conn::Node",
            #[cfg(feature = "cluster")]
            Self::Cluster(_) => "Conn::Cluster",
        })
    }
}

/// A pooled connection and the failure generation it was opened in.
#[derive(Debug)]
pub(crate) struct Pooled {
    pub(crate) conn: Conn,
    pub(super) generation: u64,
    pub(super) in_flight: Arc<InFlight>,
}

/// Opens connections of one topology.
// One per client: the size of its largest variant costs nothing.
#[allow(clippy::large_enum_variant)]
enum Factory {
    Node(redis::Client),
    #[cfg(feature = "cluster")]
    Cluster(redis::cluster::ClusterClient),
    #[cfg(feature = "sentinel")]
    Sentinel(tokio::sync::Mutex<redis::sentinel::SentinelClient>),
}

pub(crate) struct Manager {
    factory: Factory,
    /// Where each new connection gets fresh credentials, if it does.
    rotating: Option<Rotating>,
    deployment: Deployment,
    /// No response timeout (rlock applies its own deadlines), the configured connect timeout.
    settings: redis::AsyncConnectionConfig,
    failures: Arc<AtomicU64>,
}

impl std::fmt::Debug for Manager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Manager").finish_non_exhaustive()
    }
}

impl managed::Manager for Manager {
    type Type = Pooled;
    type Error = RedisError;

    async fn create(&self) -> Result<Pooled, RedisError> {
        let generation = self.failures.load(Ordering::Acquire);
        // Boxed: connecting takes kilobytes of future state, which would otherwise be part of every
        // checkout's future, and so of every waiting acquire.
        let conn = Box::pin(self.open()).await?;
        Ok(Pooled {
            conn,
            generation,
            in_flight: Arc::default(),
        })
    }

    async fn recycle(&self, pooled: &mut Pooled, _: &Metrics) -> RecycleResult<RedisError> {
        if pooled.generation < self.failures.load(Ordering::Acquire) {
            Err(RecycleError::message("opened before a connection failure"))
        } else if pooled.in_flight.late.load(Ordering::Acquire) {
            Err(RecycleError::message("a request on it missed its deadline"))
        } else {
            Ok(())
        }
    }
}

impl Manager {
    /// A manager of connections to `config`'s servers, which retires each connection opened before
    /// the last of the connection `failures` counted.
    pub(super) fn new(
        config: &Config,
        deployment: Deployment,
        failures: Arc<AtomicU64>,
    ) -> Result<Self> {
        let backend = |source| Error::backend(Operation::Connect, Subject::CLIENT, source);
        // A URL the client cannot use is the caller's to fix, and the message says which one.
        let factory = Factory::of(config, deployment).map_err(|e| {
            if e.kind() == redis::ErrorKind::InvalidClientConfig {
                Error::InvalidArgument(format!("cannot use {}: {e}", redact(&config.url)))
            } else {
                backend(e)
            }
        })?;
        Ok(Self {
            factory,
            rotating: Rotating::of(config),
            deployment,
            settings: redis::AsyncConnectionConfig::new()
                .set_connection_timeout(Some(config.connect_timeout))
                .set_response_timeout(None),
            failures,
        })
    }

    async fn open(&self) -> Result<Conn, RedisError> {
        match &self.rotating {
            None => self.factory.open(&self.settings).await,
            Some(rotating) => {
                let factory = Factory::of(&rotating.config().await?, self.deployment)?;
                factory.open(&self.settings).await
            }
        }
    }
}

impl Factory {
    fn of(config: &Config, deployment: Deployment) -> RedisResult<Self> {
        Ok(match deployment {
            Deployment::Node => Self::Node(node_client(config, &config.url)?),
            #[cfg(feature = "cluster")]
            Deployment::Cluster => Self::Cluster(
                cluster_builder(config)
                    // Never send a request again by itself: after an I/O error it may have run.
                    // `cluster` follows what proves it did not (redirects, "not now" refusals).
                    .retries(0)
                    // A backstop only: rlock's own, shorter deadline decides.
                    .response_timeout(config.command_timeout * 2 + config.replicas_sync_timeout)
                    .build()?,
            ),
            #[cfg(feature = "sentinel")]
            Deployment::Sentinel => {
                Self::Sentinel(tokio::sync::Mutex::new(sentinel_client(config)?))
            }
        })
    }

    async fn open(&self, settings: &redis::AsyncConnectionConfig) -> Result<Conn, RedisError> {
        Ok(match self {
            Factory::Node(client) => Conn::Node(
                client
                    .get_multiplexed_async_connection_with_config(settings)
                    .await?,
            ),
            #[cfg(feature = "cluster")]
            Factory::Cluster(client) => Conn::Cluster(client.get_async_connection().await?),
            #[cfg(feature = "sentinel")]
            Factory::Sentinel(sentinel) => {
                let master = sentinel.lock().await.async_get_client().await?;
                Conn::Node(
                    master
                        .get_multiplexed_async_connection_with_config(settings)
                        .await?,
                )
            }
        })
    }
}
