//! The key tables: which of Redisson's keys rlock skips without a word, which ones the top level
//! and the server sections share, and which topology-specific ones each section takes; and how a
//! message names a key as the file spells it (`clusterServersConfig.nodeAddresses[1]`). Apart from
//! the parsing, since they are lists to keep in step with Redisson's `Config` classes.

use crate::error::Error;

/// Redisson settings that exist but mean nothing to rlock: thread pools, connection pools and
/// their idle sizes, read balancing, keep-alives, DNS and cluster scans, Netty hooks, reconnection
/// back-off (rlock opens a new connection on the next command, without one). They are skipped
/// without a word, since Redisson writes most of them into every file it generates.
pub(super) const NOT_APPLICABLE: &[&str] = &[
    // Top level (org.redisson.config.Config).
    "threads",
    "nettyThreads",
    "referenceEnabled",
    "transportMode",
    "keepPubSubOrder",
    "useScriptCache",
    "minCleanUpDelay",
    "maxCleanUpDelay",
    "cleanUpKeysAmount",
    "reliableTopicWatchdogTimeout",
    "nettyHook",
    "nettyExecutor",
    "executor",
    "eventLoopGroup",
    "connectionListener",
    "addressResolverGroupFactory",
    "useThreadClassLoader",
    "lazyInitialization",
    "protocol",
    "valkeyCapabilities",
    "tcpNoDelay",
    "tcpKeepAlive",
    // Every server section (BaseConfig and its subclasses); since 4.0 the TCP settings are also
    // at the top level.
    "idleConnectionTimeout",
    "pingTimeout",
    "keepAlive",
    "tcpKeepAliveCount",
    "tcpKeepAliveIdle",
    "tcpKeepAliveInterval",
    "tcpUserTimeout",
    "reconnectionTimeout",
    "reconnectionDelay",
    "failedAttempts",
    "subscriptionsPerConnection",
    "clientName",
    "connectionMinimumIdleSize",
    "connectionPoolSize",
    "subscriptionConnectionMinimumIdleSize",
    "subscriptionConnectionPoolSize",
    "slaveConnectionMinimumIdleSize",
    "slaveConnectionPoolSize",
    "masterConnectionMinimumIdleSize",
    "masterConnectionPoolSize",
    "failedSlaveReconnectionInterval",
    "failedSlaveCheckInterval",
    "failedSlaveNodeDetector",
    "loadBalancer",
    "readMode",
    "fallbackLoadingToMaster",
    "subscriptionMode",
    "dnsMonitoring",
    "dnsMonitoringInterval",
    "dnsMonitoringTimes",
    "scanInterval",
    "checkSlotsCoverage",
    "slots",
    "checkSentinelsList",
    "checkSlaveStatusWithSyncing",
    "sentinelsDiscovery",
    // Only used with a credentialsResolver, which rlock does not run (see `Shared`).
    "credentialsReapplyInterval",
    "sslProvider",
    "sslProtocols",
    "sslCiphers",
    "sslKeystoreType",
    // A PEM trust store needs no password (a JKS one is refused: see `trusted_ca`).
    "sslTruststorePassword",
    // rlock never reads from replicas: it only makes the master WAIT for them.
    "slaveAddresses",
];

/// The keys of [`Shared`](super::servers::Shared): read by a pass of their own, at the top level and in the server section.
pub(super) const SHARED: &[&str] = &[
    "username",
    "password",
    "credentialsResolver",
    "nameMapper",
    "commandMapper",
    "sslVerificationMode",
    "sslEnableEndpointIdentification",
    "sslTruststore",
    "sslKeystore",
    "sslKeystorePassword",
    "sslTrustManagerFactory",
    "sslKeyManagerFactory",
];

/// Which section the file configures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Section {
    Single,
    Cluster,
    Sentinel,
    MasterSlave,
}

impl Section {
    pub(super) fn name(self) -> &'static str {
        match self {
            Self::Single => "singleServerConfig",
            Self::Cluster => "clusterServersConfig",
            Self::Sentinel => "sentinelServersConfig",
            Self::MasterSlave => "masterSlaveServersConfig",
        }
    }

    /// The topology-specific keys (see [`Servers::specific_keys`](super::servers::Servers::specific_keys)) this section takes.
    pub(super) fn keys(self) -> &'static [&'static str] {
        match self {
            Self::Single => &["address", "database"],
            Self::Cluster => &[
                "nodeAddresses",
                "natMap",
                "natMapper",
                "shardedSubscriptionMode",
            ],
            Self::Sentinel => &[
                "sentinelAddresses",
                "masterName",
                "sentinelUsername",
                "sentinelPassword",
                "database",
                "natMapper",
            ],
            Self::MasterSlave => &["masterAddress", "database"],
        }
    }
}

/// `path` as Redisson spells keys (`clusterServersConfig.natMap`), without serde's `?` for options.
pub(super) fn key_path(path: &serde_ignored::Path<'_>) -> String {
    use serde_ignored::Path;
    let mut parts = Vec::new();
    let mut node = path;
    loop {
        node = match node {
            Path::Root => break,
            Path::Map { parent, key } => {
                parts.push(key.clone());
                parent
            }
            Path::Seq { parent, index } => {
                parts.push(index.to_string());
                parent
            }
            Path::Some { parent }
            | Path::NewtypeStruct { parent }
            | Path::NewtypeVariant { parent } => parent,
        };
    }
    parts.reverse();
    parts.join(".")
}

pub(super) fn invalid(key: &str, reason: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!("{key}: {reason}"))
}
