//! Client configuration, with Redisson's defaults (docs/protocol.md §9).

use std::collections::HashMap;
use std::fmt;
use std::time::Duration;

use crate::codec::Codec;
use crate::credentials::{Credentials, CredentialsProvider};
use crate::error::{Error, Result};
use crate::name_mapper::NameMapper;

#[cfg(feature = "redisson-config")]
mod redisson_yaml;

/// The longest lease or watchdog timeout rlock accepts: anything longer is almost surely a unit mistake.
pub(crate) const MAX_LEASE: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// How rlock reaches Redis: which servers, and how lock writes are made durable.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Topology {
    /// One server at [`Config::url`] (Redisson's single-server mode). No replica sync.
    Single,
    /// The master at [`Config::url`], with replicas: every lock write waits (`WAIT`) for the
    /// master's connected replicas (Redisson's master/slave mode).
    MasterReplica,
    /// Redis Cluster, discovered from the seed nodes [`Config::url`] and [`Config::nodes`]. Commands
    /// follow slots (`MOVED`/`ASK`), lock writes wait for the slot master's replicas, and unlock
    /// messages use sharded pub/sub as [`Config::sharded_pubsub`] says.
    Cluster,
    /// The master that Sentinel names `master_name`, found through the sentinels at [`Config::url`]
    /// and [`Config::nodes`], followed across failovers. Lock writes wait for its replicas.
    Sentinel {
        /// The monitored master's name (`sentinel monitor <name> ...`).
        master_name: String,
        /// The master's ACL user, if any (sentinels' own credentials go in their URLs).
        username: Option<String>,
        /// The master's password, if any.
        password: Option<String>,
    },
}

/// Whether unlock messages travel on sharded pub/sub (`SPUBLISH`/`SSUBSCRIBE`), as Redisson's
/// `shardedSubscriptionMode` (docs/protocol.md §2.6). Only cluster mode ever uses sharded pub/sub.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ShardedPubSub {
    /// Sharded when the cluster supports it (`PUBSUB SHARDNUMSUB` succeeds: Redis ≥ 7). The default,
    /// and what Redisson ≥ 3.22 does, so Java and rlock hear each other.
    Auto,
    /// Always sharded.
    On,
    /// Never sharded: `PUBLISH`/`SUBSCRIBE` even on Redis 7 clusters (for Redisson ≤ 3.21 peers).
    Off,
}

/// Whether the server at [`Config::url`] is a Redis Cluster presented as one address, by a proxy or a
/// managed service's endpoint (Envoy, Azure Managed Redis's proxy policy, ...), that refuses a script
/// whose keys lie in different slots with `CROSSSLOT` (docs/protocol.md §9.2). There, rlock keeps
/// every command within one slot: the watchdog renews its locks in one batch per slot (CRC16 of the
/// key, hash tags honoured) instead of up to [`Config::watchdog_batch_size`] locks of any names.
/// Outside [`Topology::Cluster`] only; a cluster reached as a cluster always works per slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProxiedCluster {
    /// Find out when the client connects, as Redisson 4.x does: a two-key script on keys of
    /// different slots either runs or is refused with `CROSSSLOT`. The default.
    Detect,
    /// The server is a cluster behind one address: no probe, every command stays within one slot.
    Yes,
    /// The server takes scripts across slots: no probe, renewals batch locks of any names.
    No,
}

/// Settings of a [`Client`](crate::Client). Start from [`Config::new`] and change what you need.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
///
/// let mut config = rlock_redisson::Config::new("redis://127.0.0.1:6379/");
/// config.watchdog_timeout = Duration::from_secs(15);
/// config.pool_size = 32;
/// assert_eq!(config.renewal_interval(), Duration::from_secs(5));
/// ```
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Config {
    /// The Redis URL (`redis://[user:password@]host:port[/db]`, or `rediss://` for TLS): the server,
    /// the master, the first cluster seed or the first sentinel, as [`Config::topology`] says.
    /// Passwords are never logged.
    pub url: String,
    /// More cluster seeds or sentinels, in the same URL form.
    pub nodes: Vec<String>,
    /// Single server (the default), master with replicas, cluster or sentinel.
    pub topology: Topology,
    /// Sharded pub/sub in cluster mode. Default [`ShardedPubSub::Auto`].
    pub sharded_pubsub: ShardedPubSub,
    /// Address translation for cluster nodes behind NAT, Docker port mappings or a proxy
    /// (Redisson's `natMapper` with a `HostPortNatMapper`): `host:port` as the nodes announce it (in
    /// `CLUSTER SLOTS` and in `MOVED`/`ASK`) → `host:port` to connect to. Nodes not named are
    /// reached as announced. Cluster only. Default empty.
    pub nat_map: HashMap<String, String>,
    /// Whether a lock write that no replica acknowledged (while some are connected) fails: an acquire is
    /// then undone and retried, and finally fails with [`Error::NoSyncedReplicas`] (Redisson's
    /// `checkLockSyncedSlaves`). Default true. Has no effect in [`Topology::Single`].
    pub check_lock_synced_replicas: bool,
    /// How long a lock write waits for replicas to acknowledge it (Redisson's `slavesSyncTimeout`).
    /// Default 1 s.
    pub replicas_sync_timeout: Duration,
    /// Asked for the user name and password of every connection the client opens, in place of the
    /// credentials in the URLs (for Sentinel: of the master's, the sentinels keep theirs): for
    /// tokens and passwords that change while the client runs. Default none.
    pub credentials_provider: Option<CredentialsProvider>,
    /// For `rediss://` URLs: a CA certificate (PEM) to trust instead of the system's trust store, e.g.
    /// for a private CA. Applies to single, master/replica and cluster topologies; Sentinel uses the
    /// system trust store (or `#insecure` in the URL). Default none.
    pub tls_root_cert: Option<Vec<u8>>,
    /// The lease of locks taken without one, renewed every third of it while held (Redisson's
    /// `lockWatchdogTimeout`). Default 30 s.
    pub watchdog_timeout: Duration,
    /// How many locks one renewal script renews at most (Redisson's `lockWatchdogBatchSize`). Default 100.
    pub watchdog_batch_size: usize,
    /// Whether the server is a cluster behind a proxy, where no script may cross slots. Default
    /// [`ProxiedCluster::Detect`].
    pub proxied_cluster: ProxiedCluster,
    /// Command connections in the pool. Each one multiplexes many requests. Default 8.
    pub pool_size: usize,
    /// How long one command may take before it counts as timed out (Redisson's `timeout`). Default 3 s.
    pub command_timeout: Duration,
    /// How long opening a connection may take (Redisson's `connectTimeout`). Default 10 s.
    pub connect_timeout: Duration,
    /// How often an unlock whose reply was lost is re-sent with the same request id (Redisson's
    /// `retryAttempts`). Default 4.
    pub retry_attempts: u32,
    /// The first delay between retries; it doubles up to [`Config::retry_max_delay`], with jitter.
    /// Default 1 s.
    pub retry_delay: Duration,
    /// The longest delay between retries. Default 2 s.
    pub retry_max_delay: Duration,
    /// How long a waiter waits for its channel subscription before it falls back to polling.
    /// Default 7.5 s.
    pub subscription_timeout: Duration,
    /// How often the subscriber connection is sent a `PING` (Redisson's `pingConnectionInterval`);
    /// zero never. A subscriber sends nothing while its channels do not change, so a connection cut
    /// without a reset (a partition, a half-open TCP connection) would otherwise stay "live" and
    /// deaf: unlock messages lost, free hand-offs going on without hearing a force unlock. One that
    /// does not answer within [`Config::command_timeout`] is declared dead: waiters re-try, and the
    /// connection is made anew and re-subscribed. In a cluster every node is pinged. Default 30 s.
    pub ping_connection_interval: Duration,
    /// How long a fair-lock waiter that waits without a limit stays in the queue before it counts as
    /// stale and is purged, should it stop polling (Redisson's `fairLockWaitTimeout`). Default 5 min.
    pub fair_lock_wait_timeout: Duration,
    /// Local hand-off between this client's tasks (lock cohorting) for the exclusive kinds: the
    /// reentrant and non-reentrant locks, the fenced lock and the write lock. Tasks of this client
    /// that want the same lock queue up locally and only the first of them talks to Redis; a holder
    /// that releases while one of them waits passes the lock to it without a release in between:
    /// with no Redis command at all between watchdog holds of the reentrant and non-reentrant locks
    /// (Redis keeps the first holder's hash for the whole streak, renewed by the watchdog), else in
    /// one script. At most [`Config::local_handoff_limit`] hand-offs in a row and for at most
    /// [`Config::local_handoff_window`], then the lock is released for real and other clients get
    /// their turn. `false` makes every task race in Redis on its own, as Redisson does. Default true.
    /// The README's "Local queue and hand-off" says what a streak looks like from Redis and Java.
    pub local_handoff: bool,
    /// How many local hand-offs in a row a lock may take before it is released for real. Default 16.
    pub local_handoff_limit: u32,
    /// How long a streak of local hand-offs may last before the lock is released for real. Default
    /// 10 ms.
    pub local_handoff_window: Duration,
    /// Whether per-lock metrics (acquisitions, wait times, local hand-offs, lost leases) carry the
    /// lock's name as a `lock` label (see the README, "Observability"). Each name then makes series
    /// of its own, and recording them costs an allocation per acquisition: turn it on only for a
    /// bounded set of names. Default false.
    pub metrics_lock_names: bool,
    /// Maps every object name before its keys and channels are derived (Redisson's `nameMapper`),
    /// for every kind. Map as the Java services that share the locks do (e.g.
    /// [`NameMapper::prefix`] for a Java mapper that prepends a prefix), or the two sides use
    /// different keys and do not exclude each other. Handles' `name()` is the mapped name. An empty
    /// name is not mapped (operations refuse it), and neither is a name that maps to "" accepted.
    /// Default none: names are used as given.
    pub name_mapper: Option<NameMapper>,
    /// The codec Java encodes objects with (Redisson's `codec`): the default of
    /// [`Client::map`](crate::Client::map) and its kin, whose entries' locks are named after their
    /// keys as this codec encodes them, and of a group lock's values. A Redisson YAML file's
    /// `codec` sets it. Default [`Codec::Kryo5`], Redisson's.
    pub codec: Codec,
}

impl Config {
    /// The defaults, for the Redis at `url`.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            nodes: Vec::new(),
            topology: Topology::Single,
            sharded_pubsub: ShardedPubSub::Auto,
            nat_map: HashMap::new(),
            check_lock_synced_replicas: true,
            replicas_sync_timeout: Duration::from_secs(1),
            credentials_provider: None,
            tls_root_cert: None,
            watchdog_timeout: Duration::from_secs(30),
            watchdog_batch_size: 100,
            proxied_cluster: ProxiedCluster::Detect,
            pool_size: 8,
            command_timeout: Duration::from_secs(3),
            connect_timeout: Duration::from_secs(10),
            retry_attempts: 4,
            retry_delay: Duration::from_secs(1),
            retry_max_delay: Duration::from_secs(2),
            subscription_timeout: Duration::from_millis(7500),
            ping_connection_interval: Duration::from_secs(30),
            fair_lock_wait_timeout: Duration::from_secs(300),
            local_handoff: true,
            local_handoff_limit: 16,
            local_handoff_window: Duration::from_millis(10),
            metrics_lock_names: false,
            name_mapper: None,
            codec: Codec::Kryo5,
        }
    }

    /// A master at `url` whose replicas every lock write waits for.
    pub fn master_replica(url: impl Into<String>) -> Self {
        Self {
            topology: Topology::MasterReplica,
            ..Self::new(url)
        }
    }

    /// A Redis Cluster reached through `seeds` (at least one).
    ///
    /// ```
    /// let config = rlock_redisson::Config::cluster(["redis://127.0.0.1:7000/", "redis://127.0.0.1:7001/"]);
    /// assert_eq!(config.topology, rlock_redisson::Topology::Cluster);
    /// ```
    pub fn cluster<I: IntoIterator<Item = S>, S: Into<String>>(seeds: I) -> Self {
        let mut seeds = seeds.into_iter().map(Into::into);
        Self {
            topology: Topology::Cluster,
            nodes: Vec::new(),
            ..Self::new(seeds.next().unwrap_or_default())
        }
        .with_nodes(seeds)
    }

    /// The master that the sentinels at `sentinels` (at least one) call `master_name`.
    pub fn sentinel<I: IntoIterator<Item = S>, S: Into<String>>(
        master_name: impl Into<String>,
        sentinels: I,
    ) -> Self {
        let mut sentinels = sentinels.into_iter().map(Into::into);
        Self {
            topology: Topology::Sentinel {
                master_name: master_name.into(),
                username: None,
                password: None,
            },
            ..Self::new(sentinels.next().unwrap_or_default())
        }
        .with_nodes(sentinels)
    }

    fn with_nodes(mut self, nodes: impl Iterator<Item = String>) -> Self {
        self.nodes.extend(nodes);
        self
    }

    /// Every address of the topology: [`Config::url`] then [`Config::nodes`].
    pub(crate) fn addresses(&self) -> Vec<String> {
        std::iter::once(self.url.clone())
            .chain(self.nodes.iter().cloned())
            .collect()
    }

    /// Whether lock writes wait for replicas (every topology but a single server).
    pub(crate) fn syncs_replicas(&self) -> bool {
        self.topology != Topology::Single
    }

    /// How often the watchdog renews: a third of [`Config::watchdog_timeout`].
    pub fn renewal_interval(&self) -> Duration {
        self.watchdog_timeout / 3
    }

    /// How long an unlock latch lives: long enough to outlast every retry of one unlock, as
    /// Redisson's `(timeout + retryDelay) * retryAttempts`.
    pub fn unlock_latch_ttl(&self) -> Duration {
        (self.command_timeout + self.retry_max_delay)
            .saturating_mul(self.retry_attempts.max(1))
            .max(Duration::from_millis(1))
    }

    /// The delay before retry number `attempt` (0-based): doubling from `retry_delay` up to
    /// `retry_max_delay`, half fixed and half random so that clients do not retry in lockstep.
    pub(crate) fn retry_backoff(&self, attempt: u32) -> Duration {
        let ceiling = self
            .retry_delay
            .saturating_mul(1u32 << attempt.min(16))
            .min(self.retry_max_delay);
        let half = ceiling / 2;
        half + half.mul_f64(fastrand::f64())
    }

    /// This configuration with `credentials` in place of the configured ones: in every URL, or for
    /// Sentinel, as the master's.
    pub(crate) fn with_credentials(&self, credentials: &Credentials) -> redis::RedisResult<Self> {
        let mut config = self.clone();
        if let Topology::Sentinel {
            username, password, ..
        } = &mut config.topology
        {
            username.clone_from(&credentials.username);
            *password = Some(credentials.password.clone());
            return Ok(config);
        }
        for url in std::iter::once(&mut config.url).chain(&mut config.nodes) {
            let invalid = || {
                redis::RedisError::from((
                    redis::ErrorKind::InvalidClientConfig,
                    "a URL that cannot carry credentials",
                    redact(url),
                ))
            };
            let mut parsed = redis::parse_redis_url(url).ok_or_else(invalid)?;
            parsed
                .set_username(credentials.username.as_deref().unwrap_or_default())
                .and_then(|()| parsed.set_password(Some(&credentials.password)))
                .map_err(|()| invalid())?;
            *url = parsed.into();
        }
        Ok(config)
    }

    pub(crate) fn validate(&self) -> Result<()> {
        let positive = |what: &str, value: Duration| {
            if value.is_zero() {
                Err(Error::InvalidArgument(format!("{what} must be positive")))
            } else {
                Ok(())
            }
        };
        positive("command_timeout", self.command_timeout)?;
        positive("connect_timeout", self.connect_timeout)?;
        positive("subscription_timeout", self.subscription_timeout)?;
        positive("fair_lock_wait_timeout", self.fair_lock_wait_timeout)?;
        positive("replicas_sync_timeout", self.replicas_sync_timeout)?;
        if self.url.is_empty() {
            return Err(Error::InvalidArgument("a Redis URL is required".into()));
        }
        if let Topology::Sentinel { master_name, .. } = &self.topology
            && master_name.is_empty()
        {
            return Err(Error::InvalidArgument(
                "a sentinel master name is required".into(),
            ));
        }
        if self.watchdog_timeout < Duration::from_millis(30) || self.watchdog_timeout > MAX_LEASE {
            return Err(Error::InvalidArgument(format!(
                "watchdog_timeout must be between 30 ms and {MAX_LEASE:?}, got {:?}",
                self.watchdog_timeout
            )));
        }
        if let Some(bad) = self
            .nat_map
            .iter()
            .flat_map(|(from, to)| [from, to])
            .find(|address| !is_host_port(address))
        {
            return Err(Error::InvalidArgument(format!(
                "nat_map addresses are host:port, got {bad:?}"
            )));
        }
        if self.watchdog_batch_size == 0 || self.pool_size == 0 {
            return Err(Error::InvalidArgument(
                "watchdog_batch_size and pool_size must be at least 1".into(),
            ));
        }
        if self.retry_delay > self.retry_max_delay {
            return Err(Error::InvalidArgument(
                "retry_delay must not exceed retry_max_delay".into(),
            ));
        }
        Ok(())
    }
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("url", &redact(&self.url))
            .field(
                "nodes",
                &self.nodes.iter().map(|n| redact(n)).collect::<Vec<_>>(),
            )
            .field("topology", &RedactedTopology(&self.topology))
            .field("sharded_pubsub", &self.sharded_pubsub)
            .field("nat_map", &self.nat_map)
            .field(
                "check_lock_synced_replicas",
                &self.check_lock_synced_replicas,
            )
            .field("replicas_sync_timeout", &self.replicas_sync_timeout)
            .field("credentials_provider", &self.credentials_provider)
            .field(
                "tls_root_cert",
                &self.tls_root_cert.as_ref().map(|_| "<pem>"),
            )
            .field("watchdog_timeout", &self.watchdog_timeout)
            .field("watchdog_batch_size", &self.watchdog_batch_size)
            .field("proxied_cluster", &self.proxied_cluster)
            .field("pool_size", &self.pool_size)
            .field("command_timeout", &self.command_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("retry_attempts", &self.retry_attempts)
            .field("retry_delay", &self.retry_delay)
            .field("retry_max_delay", &self.retry_max_delay)
            .field("subscription_timeout", &self.subscription_timeout)
            .field("ping_connection_interval", &self.ping_connection_interval)
            .field("fair_lock_wait_timeout", &self.fair_lock_wait_timeout)
            .field("local_handoff", &self.local_handoff)
            .field("local_handoff_limit", &self.local_handoff_limit)
            .field("local_handoff_window", &self.local_handoff_window)
            .field("metrics_lock_names", &self.metrics_lock_names)
            .field("name_mapper", &self.name_mapper)
            .field("codec", &self.codec)
            .finish()
    }
}

/// Whether `address` is `host:port`.
fn is_host_port(address: &str) -> bool {
    address
        .rsplit_once(':')
        .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok())
}

/// The topology without the sentinel master's password.
struct RedactedTopology<'a>(&'a Topology);

impl fmt::Debug for RedactedTopology<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Topology::Sentinel {
                master_name,
                username,
                password,
            } => f
                .debug_struct("Sentinel")
                .field("master_name", master_name)
                .field("username", username)
                .field("password", &password.as_ref().map(|_| "***"))
                .finish(),
            other => fmt::Debug::fmt(other, f),
        }
    }
}

/// `url` with its password replaced by `***`, for logs.
pub(crate) fn redact(url: &str) -> String {
    let Some(scheme_end) = url.find("://").map(|i| i + 3) else {
        return url.to_owned();
    };
    let authority_end = url[scheme_end..]
        .find('/')
        .map_or(url.len(), |i| scheme_end + i);
    let Some(at) = url[scheme_end..authority_end]
        .rfind('@')
        .map(|i| scheme_end + i)
    else {
        return url.to_owned();
    };
    match url[scheme_end..at].find(':').map(|i| scheme_end + i) {
        Some(colon) => format!("{}:***{}", &url[..colon], &url[at..]),
        None => format!("{}***{}", &url[..scheme_end], &url[at..]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(
            redact("redis://user:secret@host:6379/0"),
            "redis://user:***@host:6379/0"
        );
        assert_eq!(redact("redis://secret@host/"), "redis://***@host/");
        assert_eq!(redact("redis://host:6379/"), "redis://host:6379/");
        assert!(!format!("{:?}", Config::new("rediss://u:pw@h/")).contains("pw"));
        let mut sentinel = Config::sentinel("m", ["redis://:sentpw@s1/", "redis://s2/"]);
        if let Topology::Sentinel { password, .. } = &mut sentinel.topology {
            *password = Some("masterpw".into());
        }
        let shown = format!("{sentinel:?}");
        assert!(
            !shown.contains("sentpw") && !shown.contains("masterpw"),
            "{shown}"
        );
    }

    #[test]
    fn latch_ttl_outlasts_all_retries() {
        let config = Config::new("redis://h/");
        assert_eq!(config.unlock_latch_ttl(), Duration::from_secs(20));
        for attempt in 0..10 {
            assert!(config.retry_backoff(attempt) <= config.retry_max_delay);
        }
    }

    #[test]
    fn bad_settings_are_rejected() {
        let mut config = Config::new("redis://h/");
        config.watchdog_timeout = Duration::ZERO;
        assert!(matches!(config.validate(), Err(Error::InvalidArgument(_))));
        let mut config = Config::new("redis://h/");
        config.pool_size = 0;
        assert!(matches!(config.validate(), Err(Error::InvalidArgument(_))));
        assert!(Config::new("redis://h/").validate().is_ok());
    }
}
