//! Command connections: a deadpool pool of multiplexed connections with deadlines on everything.
//!
//! One pooled [`Conn`] is a multiplexed connection to a server (single server, master, or the master
//! Sentinel names, resolved again for every new connection) or a cluster connection that routes by
//! slot and follows `MOVED`/`ASK`.
//!
//! No layer below rlock sends a request twice. A request whose connection broke or whose deadline
//! passed may have run, and only rlock can reconcile it (the acquire's undo, the unlock latch,
//! `OutcomeUnknown`): redis-rs's multiplexed connections never re-send, the pool opens new
//! connections for new requests only, and the cluster client's own retries are off, with
//! [`cluster`] following the redirects and refusals that prove a request did not run. The only
//! re-send below rlock is redis-rs's `EVALSHA` after `NOSCRIPT`, which did not run either.
//!
//! The pool is deadpool's managed pool with rlock's own manager rather than deadpool-redis's, for two
//! reasons that matter to a lock: deadpool-redis recycles with a `PING` on every checkout (an extra
//! round trip per lock operation), and it opens connections with redis-rs's default 500 ms response
//! timeout, which would cut a 1 s `WAIT` short and turn it into an error whose outcome looks known.
//! Here rlock owns every deadline, recycling is free, and every connection opened before the last
//! connection failure is retired: one broken connection (or a master turned replica after a failover)
//! usually means its siblings are stale too. A request that misses its deadline counts as a failure:
//! replies come in order, so a stuck request would hold up everything sent after it on that
//! connection (seen after a Sentinel failover: a `WAIT` on the promoted master never returned).
//!
//! Lock writes in replicated topologies are pipelined with `WAIT <replicas> <timeout>` on the same
//! connection to the same master (docs/protocol.md §5.2); the replica count is read from the
//! master's `INFO replication` and cached until a `WAIT` reply disagrees with it.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use deadpool::managed::{self, Metrics, Object, Pool, PoolError, RecycleError, RecycleResult};
use futures::FutureExt as _;
use parking_lot::Mutex;
use redis::aio::{ConnectionLike, MultiplexedConnection};
#[cfg(feature = "cluster")]
use redis::cluster_async::ClusterConnection;
#[cfg(feature = "cluster")]
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use redis::{Cmd, Pipeline, RedisError, RedisFuture, RedisResult, Value};

use crate::config::{Config, Topology, redact};
use crate::credentials::CredentialsProvider;
use crate::error::{Error, Operation, Result, Subject};
use crate::scripts::ScriptCall;

#[cfg(feature = "cluster")]
mod cluster;
pub(crate) mod probe;

/// Where a key lives: its cluster hash slot, for what is kept per master (replica counts) and for
/// the commands that must not cross slots (renewal batches, latch deletions).
pub(crate) use redis::cluster_routing::Slot;

/// How a [`Config`] reaches Redis, among the topologies this build supports.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Deployment {
    /// The single server or the master at [`Config::url`].
    Node,
    /// A Redis Cluster.
    #[cfg(feature = "cluster")]
    Cluster,
    /// The master Sentinel names.
    #[cfg(feature = "sentinel")]
    Sentinel,
}

impl Deployment {
    /// How `config` reaches Redis. Fails with [`Error::FeatureDisabled`] when it needs what this build
    /// was compiled without: its topology's feature, or `tls` for `rediss://` URLs and
    /// [`Config::tls_root_cert`].
    pub(crate) fn of(config: &Config) -> Result<Self> {
        let disabled = |feature, needed_by| Err(Error::FeatureDisabled { feature, needed_by });
        if !cfg!(feature = "tls") {
            if config.tls_root_cert.is_some() {
                return disabled("tls", "Config::tls_root_cert");
            }
            if config.addresses().iter().any(|url| is_tls_url(url)) {
                return disabled("tls", "a rediss:// URL");
            }
        }
        match config.topology {
            Topology::Single | Topology::MasterReplica => Ok(Self::Node),
            #[cfg(feature = "cluster")]
            Topology::Cluster => Ok(Self::Cluster),
            #[cfg(not(feature = "cluster"))]
            Topology::Cluster => disabled("cluster", "Topology::Cluster"),
            #[cfg(feature = "sentinel")]
            Topology::Sentinel { .. } => Ok(Self::Sentinel),
            #[cfg(not(feature = "sentinel"))]
            Topology::Sentinel { .. } => disabled("sentinel", "Topology::Sentinel"),
        }
    }
}

/// Whether `url` asks for TLS (`rediss://`, or redis-rs's `valkeys://` alias).
fn is_tls_url(url: &str) -> bool {
    url.split_once("://").is_some_and(|(scheme, _)| {
        scheme.eq_ignore_ascii_case("rediss") || scheme.eq_ignore_ascii_case("valkeys")
    })
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
    generation: u64,
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
    async fn on_master_of(&mut self, key: &str, pipeline: Pipeline) -> RedisResult<Vec<Value>> {
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
    async fn replication_info(&mut self, key: &str) -> RedisResult<String> {
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
    generation: u64,
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

/// A configuration whose credentials are asked for anew for each connection
/// ([`Config::credentials_provider`]).
pub(crate) struct Rotating {
    provider: CredentialsProvider,
    config: Config,
}

impl Rotating {
    /// `config`'s, when it has a credentials provider.
    pub(crate) fn of(config: &Config) -> Option<Self> {
        let provider = config.credentials_provider.clone()?;
        Some(Self {
            provider,
            config: config.clone(),
        })
    }

    /// The configuration with the provider's current credentials.
    pub(crate) async fn config(&self) -> RedisResult<Config> {
        let credentials = self.provider.credentials().await?;
        self.config.with_credentials(&credentials)
    }
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
        Ok(Pooled { conn, generation })
    }

    async fn recycle(&self, pooled: &mut Pooled, _: &Metrics) -> RecycleResult<RedisError> {
        if pooled.generation < self.failures.load(Ordering::Acquire) {
            Err(RecycleError::message("opened before a connection failure"))
        } else {
            Ok(())
        }
    }
}

impl Manager {
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

/// A client for the server at `url`, trusting [`Config::tls_root_cert`] for `rediss://`.
pub(crate) fn node_client(config: &Config, url: &str) -> RedisResult<redis::Client> {
    match &config.tls_root_cert {
        #[cfg(feature = "tls")]
        Some(root) => redis::Client::build_with_tls(url, trusting(root)),
        // Without the `tls` feature, `Deployment::of` refused a root certificate.
        _ => redis::Client::open(url),
    }
}

/// TLS settings that trust the CA certificate `root` (PEM), without a client certificate.
#[cfg(feature = "tls")]
fn trusting(root: &[u8]) -> redis::TlsCertificates {
    redis::TlsCertificates {
        client_tls: None,
        root_cert: Some(root.to_vec()),
    }
}

/// A cluster client builder for the configured seeds, trusting [`Config::tls_root_cert`].
#[cfg(feature = "cluster")]
pub(crate) fn cluster_builder(config: &Config) -> redis::cluster::ClusterClientBuilder {
    let mut builder = redis::cluster::ClusterClientBuilder::new(config.addresses())
        .connection_timeout(config.connect_timeout);
    if !config.nat_map.is_empty() {
        builder = builder.node_address_map(
            config
                .nat_map
                .iter()
                .filter_map(|(announced, reachable)| {
                    Some((node_address(announced)?, node_address(reachable)?))
                })
                .collect(),
        );
    }
    match &config.tls_root_cert {
        #[cfg(feature = "tls")]
        Some(root) => builder.certs(trusting(root)),
        _ => builder,
    }
}

/// `host:port` as a cluster node address ([`Config::validate`] checked the form).
#[cfg(feature = "cluster")]
fn node_address(address: &str) -> Option<redis::cluster::NodeAddress> {
    let (host, port) = address.rsplit_once(':')?;
    Some(redis::cluster::NodeAddress::new(
        host.to_owned(),
        port.parse().ok()?,
    ))
}

/// A Sentinel client for the configured master: the sentinels are the configured addresses; the
/// master is reached with the topology's credentials and the database and TLS mode of `url`.
#[cfg(feature = "sentinel")]
pub(crate) fn sentinel_client(config: &Config) -> RedisResult<redis::sentinel::SentinelClient> {
    use redis::IntoConnectionInfo as _;
    let Topology::Sentinel {
        master_name,
        username,
        password,
    } = &config.topology
    else {
        return Err(RedisError::from((
            redis::ErrorKind::Client,
            "not a sentinel topology",
        )));
    };
    let template = config.url.as_str().into_connection_info()?;
    let mut settings = template.redis_settings().clone();
    if let Some(username) = username {
        settings = settings.set_username(username);
    }
    if let Some(password) = password {
        settings = settings.set_password(password);
    }
    let mut master =
        redis::sentinel::SentinelNodeConnectionInfo::default().set_redis_connection_info(settings);
    if let redis::ConnectionAddr::TcpTls { insecure, .. } = template.addr() {
        master = master.set_tls_mode(if *insecure {
            redis::TlsMode::Insecure
        } else {
            redis::TlsMode::Secure
        });
    }
    redis::sentinel::SentinelClient::build(
        config.addresses(),
        // A `String`: redis-rs takes `impl AsRef<str>` with TLS and `String` without.
        master_name.clone(),
        Some(master),
        redis::sentinel::SentinelServerType::Master,
    )
}

/// The pool plus the deadlines every command runs under.
#[derive(Clone, Debug)]
pub(crate) struct Commands {
    pool: Pool<Manager>,
    failures: Arc<AtomicU64>,
    /// Connected replicas of each slot's master (slot 0 outside cluster mode), while known.
    replicas: Arc<Mutex<HashMap<Slot, u32>>>,
    sync: Option<ReplicaSync>,
    cluster: bool,
    /// Whether a command may name keys of one slot only: in a cluster, reached as one or behind a
    /// proxy (see [`probe::probe`]).
    single_slot: bool,
    pub(crate) timeout: Duration,
    /// How long opening a connection may take.
    connect_timeout: Duration,
}

/// How lock writes wait for replicas.
#[derive(Clone, Copy, Debug)]
struct ReplicaSync {
    timeout: Duration,
    required: bool,
}

/// What became of a lock write: the one outcome type every caller sorts.
#[derive(Debug)]
pub(crate) enum Written {
    /// The script ran and replied; replicas acknowledged it where the topology asks for that.
    Ran(Value),
    /// The script ran on the master, but none of its `replicas` connected replicas acknowledged it.
    Unsynced {
        /// The script's reply.
        reply: Value,
        /// How many replicas were connected.
        replicas: u32,
    },
    /// Redis refused the script (e.g. `WRONGTYPE`): it changed nothing.
    Refused(RedisError),
    /// No reply: the script may or may not have run.
    Unknown(Unknown),
}

/// Why the outcome of a write is not known.
#[derive(Debug)]
pub(crate) enum Unknown {
    /// The connection broke after the request may have been sent.
    Broken(RedisError),
    /// The command deadline passed.
    TimedOut(Duration),
}

impl Unknown {
    /// The error a caller reports when it cannot reconcile the outcome itself.
    pub(crate) fn into_error(self, operation: Operation, subject: Subject<'_>) -> Error {
        match self {
            Self::Broken(source) => Error::backend(operation, subject, source),
            Self::TimedOut(after) => Error::timeout(operation, subject, after),
        }
    }
}

/// The reply of a lock write and, where replicas are waited for, how many acknowledged it.
#[derive(Debug)]
struct Synced {
    reply: Value,
    /// Connected replicas that did not acknowledge: `Some(n)` when none of `n > 0` did.
    unsynced: Option<u32>,
}

impl Commands {
    pub(crate) fn new(config: &Config, deployment: Deployment) -> Result<Self> {
        let backend = |source| Error::backend(Operation::Connect, Subject::CLIENT, source);
        // A URL the client cannot use is the caller's to fix, and the message says which one.
        let factory = Factory::of(config, deployment).map_err(|e| {
            if e.kind() == redis::ErrorKind::InvalidClientConfig {
                Error::InvalidArgument(format!("cannot use {}: {e}", redact(&config.url)))
            } else {
                backend(e)
            }
        })?;
        let failures = Arc::new(AtomicU64::new(0));
        let manager = Manager {
            factory,
            rotating: Rotating::of(config),
            deployment,
            settings: redis::AsyncConnectionConfig::new()
                .set_connection_timeout(Some(config.connect_timeout))
                .set_response_timeout(None),
            failures: failures.clone(),
        };
        let pool = Pool::builder(manager)
            .max_size(config.pool_size)
            .runtime(deadpool::Runtime::Tokio1)
            .wait_timeout(Some(config.command_timeout))
            .create_timeout(Some(config.connect_timeout))
            .build()
            .map_err(|e| Error::InvalidArgument(format!("connection pool: {e}")))?;
        Ok(Self {
            pool,
            failures,
            replicas: Arc::default(),
            sync: config.syncs_replicas().then_some(ReplicaSync {
                timeout: config.replicas_sync_timeout,
                required: config.check_lock_synced_replicas,
            }),
            cluster: config.topology == Topology::Cluster,
            single_slot: config.topology == Topology::Cluster,
            timeout: config.command_timeout,
            connect_timeout: config.connect_timeout,
        })
    }

    /// The slot that a command naming several keys, `key` among them, must keep to: `None` where
    /// keys of any slots may share a command.
    pub(crate) fn batch_slot(&self, key: &str) -> Option<Slot> {
        self.single_slot.then(|| Slot::for_key(key))
    }

    /// The slot `key` belongs to: its cluster slot, or one slot for a whole single server.
    pub(crate) fn slot_of(&self, key: &str) -> Slot {
        if self.cluster {
            Slot::for_key(key)
        } else {
            SINGLE_NODE
        }
    }

    /// Checks a connection out of the pool.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: nothing has been sent yet.
    pub(crate) async fn get(
        &self,
        operation: Operation,
        subject: Subject<'_>,
    ) -> Result<Connection> {
        let pooled: Object<Manager> = self.pool.get().await.map_err(|e| match e {
            // Opening a connection took too long (a server that accepts but does not answer).
            PoolError::Timeout(managed::TimeoutType::Create) => {
                Error::timeout(Operation::Connect, subject, self.connect_timeout)
            }
            PoolError::Timeout(_) => Error::timeout(operation, subject, self.timeout),
            PoolError::Backend(source) => {
                self.connection_failed();
                if source.is_timeout() {
                    Error::timeout(Operation::Connect, subject, self.connect_timeout)
                } else {
                    Error::backend(Operation::Connect, subject, source)
                }
            }
            PoolError::Closed | PoolError::NoRuntimeSpecified => Error::Closed,
            PoolError::PostCreateHook(e) => Error::InvalidArgument(e.to_string()),
        })?;
        Ok(Connection {
            conn: pooled.conn.clone(),
            generation: pooled.generation,
        })
    }

    /// `conn` (checked out earlier) for another request, unless the pool would retire it now: a
    /// connection failed since it was opened.
    pub(crate) fn still_fresh(&self, conn: Connection) -> Option<Connection> {
        (conn.generation >= self.failures.load(Ordering::Acquire)).then_some(conn)
    }

    /// Awaits `request` (a command on a checked-out connection) under the command timeout (plus the
    /// replica wait when the request includes one). Connection failures and missed deadlines retire
    /// the pool's older connections. `Err(Elapsed)` means the deadline passed.
    ///
    /// Combinators rather than an `async fn`, which would keep `request` twice (as its argument
    /// and inside the timeout it awaits): every lock and unlock goes through here.
    pub(crate) fn run<T>(
        &self,
        request: impl Future<Output = RedisResult<T>>,
    ) -> impl Future<Output = Result<RedisResult<T>, Elapsed>> {
        let deadline = self.timeout + self.sync.map_or(Duration::ZERO, |s| s.timeout);
        tokio::time::timeout(deadline, request).map(|reply| {
            let Ok(reply) = reply else {
                // Requests on a multiplexed connection are answered in order: one that is stuck (a
                // paused server, a `WAIT` that never returns) holds up every later one on it.
                self.connection_failed();
                return Err(Elapsed);
            };
            if let Err(e) = &reply
                && retires_connection(e)
            {
                self.connection_failed();
            }
            Ok(reply)
        })
    }

    /// Runs a lock write (a script call whose first key is the lock) on `conn` under the command
    /// deadline, followed on the same connection by `WAIT` for the master's replicas when the
    /// topology has them.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: the script may or may not have run. Callers own an undo for that.
    pub(crate) fn write(
        &self,
        conn: &mut Conn,
        call: &ScriptCall,
    ) -> impl Future<Output = Written> {
        self.run(self.write_synced(conn, call))
            .map(|outcome| self.written(outcome))
    }

    /// Runs a write that Redisson sends without waiting for replicas (a latch's count-down,
    /// docs/protocol.md §5.1) on `conn` under the command deadline.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: the script may or may not have run.
    pub(crate) async fn write_unsynced(&self, conn: &mut Conn, call: &ScriptCall) -> Written {
        let outcome = self
            .run(async {
                let reply = call.invoke(conn).await?;
                Ok(Synced {
                    reply,
                    unsynced: None,
                })
            })
            .await;
        self.written(outcome)
    }

    fn written(&self, outcome: Result<RedisResult<Synced>, Elapsed>) -> Written {
        match outcome {
            Ok(Ok(Synced {
                reply,
                unsynced: None,
            })) => Written::Ran(reply),
            Ok(Ok(Synced {
                reply,
                unsynced: Some(replicas),
            })) => Written::Unsynced { reply, replicas },
            Ok(Err(e)) if outcome_unknown(&e) => Written::Unknown(Unknown::Broken(e)),
            Ok(Err(e)) => Written::Refused(e),
            Err(Elapsed) => Written::Unknown(Unknown::TimedOut(self.timeout)),
        }
    }

    async fn write_synced(&self, conn: &mut Conn, call: &ScriptCall) -> RedisResult<Synced> {
        match self.sync {
            // Boxed: the replica round trips' futures are kilobytes, and every write's future (and
            // each future that awaits one) would carry them inline, and copy them as it is moved.
            Some(sync) => Box::pin(self.write_waiting_for_replicas(conn, call, sync)).await,
            None => Ok(Synced {
                reply: call.invoke(conn).await?,
                unsynced: None,
            }),
        }
    }

    /// [`Commands::write_synced`] where the master has replicas to wait for.
    async fn write_waiting_for_replicas(
        &self,
        conn: &mut Conn,
        call: &ScriptCall,
        sync: ReplicaSync,
    ) -> RedisResult<Synced> {
        let key = call.keys().first().map_or("", String::as_str);
        let slot = self.slot_of(key);
        let known = self.replicas.lock().get(&slot).copied();
        let replicas = match known {
            Some(replicas) => replicas,
            None => {
                let replicas = connected_replicas(&conn.replication_info(key).await?);
                let _ = self.replicas.lock().insert(slot, replicas);
                replicas
            }
        };
        if replicas == 0 {
            let reply = call.invoke(conn).await?;
            return Ok(Synced {
                reply,
                unsynced: None,
            });
        }
        let mut pipeline = redis::pipe();
        // Errors come back as values (as cluster pipelines return them anyway), so NOSCRIPT can be told
        // apart from a failed pipeline.
        let _ = pipeline
            .ignore_errors()
            .add_command(call.evalsha())
            .cmd("WAIT")
            .arg(replicas)
            .arg(sync.timeout.as_millis());
        let mut replies = conn.on_master_of(key, pipeline.clone()).await?;
        // In a pipeline, a script's error comes back as a value: NOSCRIPT means it did not run.
        if matches!(replies.first(), Some(Value::ServerError(e)) if e.kind() == Some(redis::ServerErrorKind::NoScript))
        {
            call.load(conn).await?;
            replies = conn.on_master_of(key, pipeline).await?;
        }
        let acknowledged = match replies.pop() {
            Some(Value::Int(n)) => u32::try_from(n).unwrap_or(0),
            _ => 0,
        };
        let reply = match replies.pop() {
            Some(Value::ServerError(e)) => return Err(e.into()),
            Some(reply) => reply,
            None => Value::Nil,
        };
        if acknowledged != replicas {
            // The replica set changed: read it again next time (docs/protocol.md §5.2 step 5).
            let _ = self.replicas.lock().remove(&slot);
        }
        Ok(Synced {
            reply,
            unsynced: (acknowledged == 0 && sync.required).then_some(replicas),
        })
    }

    /// Checks out a connection and runs one plain command: for reads and fire-and-forget writes.
    pub(crate) async fn query<T: redis::FromRedisValue>(
        &self,
        operation: Operation,
        subject: Subject<'_>,
        cmd: &redis::Cmd,
    ) -> Result<T> {
        let mut conn = self.get(operation, subject).await?;
        match self.run(cmd.query_async(&mut conn.conn)).await {
            Ok(reply) => reply.map_err(|e| Error::from_redis(operation, subject, e)),
            Err(Elapsed) => Err(Error::timeout(operation, subject, self.timeout)),
        }
    }

    /// Checks out a connection and runs one read-only script call.
    pub(crate) async fn script<T: redis::FromRedisValue>(
        &self,
        operation: Operation,
        subject: Subject<'_>,
        call: &ScriptCall,
    ) -> Result<T> {
        let mut conn = self.get(operation, subject).await?;
        match self.run(call.invoke(&mut conn.conn)).await {
            Ok(reply) => reply
                .and_then(|value| redis::from_redis_value(value).map_err(Into::into))
                .map_err(|e| Error::from_redis(operation, subject, e)),
            Err(Elapsed) => Err(Error::timeout(operation, subject, self.timeout)),
        }
    }

    /// A connection to the server broke (one of the pool's, or the subscriber's): the pooled ones
    /// may be broken too, so each is replaced at its next checkout rather than written to.
    pub(crate) fn connection_failed(&self) {
        let _ = self.failures.fetch_add(1, Ordering::AcqRel);
    }
}

/// The cache slot of every key outside cluster mode, where one master owns everything.
const SINGLE_NODE: Slot = match Slot::new(0) {
    Some(slot) => slot,
    None => unreachable!(),
};

/// `connected_slaves:<n>` of an `INFO replication` reply.
fn connected_replicas(info: &str) -> u32 {
    info.lines()
        .find_map(|line| line.strip_prefix("connected_slaves:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

/// The command deadline passed before a reply arrived: the command may or may not have run.
#[derive(Debug)]
pub(crate) struct Elapsed;

/// Whether `e` says the connection broke.
fn is_broken(e: &RedisError) -> bool {
    e.is_io_error()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || e.is_unrecoverable_error()
}

/// Whether a command that failed with `e` may still have run: the connection broke or the reply
/// timed out. Any other error is Redis refusing the command, which then changed nothing.
pub(crate) fn outcome_unknown(e: &RedisError) -> bool {
    is_broken(e) || e.is_timeout()
}

/// Whether `e` is the server refusing a command for good: an ACL denies it (`NOPERM`) or the server
/// does not know it (a proxy or a service that does not offer it).
pub(crate) fn refused(e: &RedisError) -> bool {
    e.code() == Some("NOPERM")
        || e.to_string()
            .to_ascii_lowercase()
            .contains("unknown command")
}

/// Whether `e` means this connection should not be used again: it broke, or it talks to a master
/// that became a replica (a failover happened; new connections find the new master).
fn retires_connection(e: &RedisError) -> bool {
    is_broken(e) || e.code() == Some("READONLY")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replica_count_comes_from_connected_slaves() {
        let info = "# Replication\r\nrole:master\r\nconnected_slaves:2\r\nslave0:ip=127.0.0.1\r\n";
        assert_eq!(connected_replicas(info), 2);
        assert_eq!(connected_replicas("role:master\r\n"), 0);
    }

    /// The feature `config` needs and this build lacks, if any.
    fn missing_feature(config: &Config) -> Option<&'static str> {
        match Deployment::of(config) {
            Ok(_) => None,
            Err(Error::FeatureDisabled { feature, .. }) => Some(feature),
            Err(other) => panic!("unexpected error: {other}"),
        }
    }

    #[test]
    fn topologies_and_tls_need_their_features() {
        let lacking = |feature: &'static str, enabled: bool| (!enabled).then_some(feature);
        assert_eq!(
            missing_feature(&Config::new("redis://127.0.0.1:6379/")),
            None
        );
        assert_eq!(
            missing_feature(&Config::master_replica("redis://127.0.0.1:6379/")),
            None
        );
        assert_eq!(
            missing_feature(&Config::cluster(["redis://127.0.0.1:7000/"])),
            lacking("cluster", cfg!(feature = "cluster"))
        );
        assert_eq!(
            missing_feature(&Config::sentinel("m", ["redis://127.0.0.1:26379/"])),
            lacking("sentinel", cfg!(feature = "sentinel"))
        );
        let tls = lacking("tls", cfg!(feature = "tls"));
        assert_eq!(
            missing_feature(&Config::new("rediss://127.0.0.1:6380/")),
            tls
        );
        assert_eq!(
            missing_feature(&Config::new("REDISS://127.0.0.1:6380/")),
            tls
        );
        let mut tls_node = Config::master_replica("redis://127.0.0.1:6379/");
        tls_node.nodes.push("valkeys://127.0.0.1:6380/".into());
        assert_eq!(missing_feature(&tls_node), tls);
        let mut trusting = Config::new("redis://127.0.0.1:6379/");
        trusting.tls_root_cert = Some(b"-----BEGIN CERTIFICATE-----".to_vec());
        assert_eq!(missing_feature(&trusting), tls);
    }

    #[cfg(not(feature = "cluster"))]
    #[tokio::test]
    async fn a_client_without_the_cluster_feature_refuses_a_cluster_before_connecting() {
        // Nothing listens on port 1: an attempt to connect would fail with a backend error instead.
        let refused = crate::Client::with_config(Config::cluster(["redis://127.0.0.1:1/"])).await;
        assert!(
            matches!(
                &refused,
                Err(Error::FeatureDisabled {
                    feature: "cluster",
                    needed_by: "Topology::Cluster"
                })
            ),
            "{refused:?}"
        );
    }
}
