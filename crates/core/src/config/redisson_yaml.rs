//! [`Config::from_redisson_yaml`]: Redisson's YAML config files (`Config.fromYAML` in Java), so that
//! Java and Rust services share one file.
//!
//! The file is read with serde: the settings rlock has are fields of [`RedissonYaml`] and
//! [`Servers`]; every other key is reported by `serde_ignored` and is either one of Redisson's own
//! settings that has no meaning here ([`NOT_APPLICABLE`], silent), one that rlock cannot honour
//! ([`NOT_MAPPED`], a warning with the reason) or unknown (a warning naming it).

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use serde::de::IgnoredAny;

use crate::config::{Config, ShardedPubSub, Topology};
use crate::error::{Error, Result};

/// Redisson settings that exist but mean nothing to rlock: thread pools, codecs, connection pools and
/// their idle sizes, read balancing, keep-alives, DNS and cluster scans, Netty hooks. They are
/// skipped without a word, since Redisson writes most of them into every file it generates.
const NOT_APPLICABLE: &[&str] = &[
    // Top level (org.redisson.config.Config).
    "threads",
    "nettyThreads",
    "codec",
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
    // Every server section (BaseConfig and its subclasses).
    "idleConnectionTimeout",
    "pingTimeout",
    "pingConnectionInterval",
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
    "subscriptionMode",
    "dnsMonitoring",
    "dnsMonitoringInterval",
    "scanInterval",
    "checkSlotsCoverage",
    "slots",
    "checkSentinelsList",
    "checkSlaveStatusWithSyncing",
    "sentinelsDiscovery",
    "nameMapper",
    "commandMapper",
    "sslProvider",
    "sslProtocols",
    "sslCiphers",
    "sslKeystoreType",
    // A PEM trust store needs no password (a JKS one is refused: see `trusted_ca`).
    "sslTruststorePassword",
    // rlock never reads from replicas: it only makes the master WAIT for them.
    "slaveAddresses",
];

/// Redisson settings that would matter to rlock but that it cannot take over, with the reason the
/// warning gives.
const NOT_MAPPED: &[(&str, &str)] = &[
    (
        "retryDelay",
        "Redisson's delay objects are not read; rlock keeps its retry delays (set retryInterval)",
    ),
    (
        "credentialsResolver",
        "credentials come from username and password only",
    ),
    (
        "sslKeystorePassword",
        "client certificates are not supported",
    ),
];

/// A Redisson YAML file: the top-level `org.redisson.config.Config` settings rlock has, and the
/// sections of the topologies.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RedissonYaml {
    single_server_config: Option<Servers>,
    cluster_servers_config: Option<Servers>,
    sentinel_servers_config: Option<Servers>,
    master_slave_servers_config: Option<Servers>,
    /// Refused: rlock cannot tell which of the nodes is the master.
    replicated_servers_config: Option<IgnoredAny>,
    lock_watchdog_timeout: Option<u64>,
    lock_watchdog_batch_size: Option<usize>,
    check_lock_synced_slaves: Option<bool>,
    slaves_sync_timeout: Option<u64>,
    fair_lock_wait_timeout: Option<u64>,
}

/// One `*ServersConfig` section. The sections share most keys, so one type reads them all and
/// [`Section::keys`] says which of the topology-specific ones each section takes.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct Servers {
    address: Option<String>,
    node_addresses: Option<Vec<String>>,
    master_address: Option<String>,
    sentinel_addresses: Option<Vec<String>>,
    master_name: Option<String>,
    sentinel_username: Option<String>,
    sentinel_password: Option<String>,
    database: Option<u32>,
    nat_map: Option<HashMap<String, String>>,
    nat_mapper: Option<NatMapper>,
    sharded_subscription_mode: Option<String>,
    username: Option<String>,
    password: Option<String>,
    connect_timeout: Option<u64>,
    timeout: Option<u64>,
    retry_attempts: Option<u32>,
    retry_interval: Option<u64>,
    subscription_timeout: Option<u64>,
    ssl_truststore: Option<String>,
    ssl_keystore: Option<String>,
    ssl_enable_endpoint_identification: Option<bool>,
    ssl_verification_mode: Option<String>,
}

/// A `natMapper`. Redisson tags it with its Java class (`!<org.redisson.api.HostPortNatMapper>`);
/// the YAML reader skips such verbatim tags, so the class shows in the keys: `hostsPortMap` for
/// `HostPortNatMapper`, `hostsMap` for `HostNatMapper`, none for `DefaultNatMapper`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct NatMapper {
    hosts_port_map: Option<HashMap<String, String>>,
    hosts_map: Option<IgnoredAny>,
}

/// Which section the file configures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Section {
    Single,
    Cluster,
    Sentinel,
    MasterSlave,
}

impl Section {
    fn name(self) -> &'static str {
        match self {
            Self::Single => "singleServerConfig",
            Self::Cluster => "clusterServersConfig",
            Self::Sentinel => "sentinelServersConfig",
            Self::MasterSlave => "masterSlaveServersConfig",
        }
    }

    /// The topology-specific keys (see [`Servers::specific_keys`]) this section takes.
    fn keys(self) -> &'static [&'static str] {
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

impl Servers {
    /// The topology-specific keys present in this section.
    fn specific_keys(&self) -> impl Iterator<Item = &'static str> {
        [
            ("address", self.address.is_some()),
            ("nodeAddresses", self.node_addresses.is_some()),
            ("masterAddress", self.master_address.is_some()),
            ("sentinelAddresses", self.sentinel_addresses.is_some()),
            ("masterName", self.master_name.is_some()),
            ("sentinelUsername", self.sentinel_username.is_some()),
            ("sentinelPassword", self.sentinel_password.is_some()),
            ("database", self.database.is_some()),
            ("natMap", self.nat_map.is_some()),
            ("natMapper", self.nat_mapper.is_some()),
            (
                "shardedSubscriptionMode",
                self.sharded_subscription_mode.is_some(),
            ),
        ]
        .into_iter()
        .filter_map(|(key, present)| present.then_some(key))
    }
}

/// A file's configuration, and the keys rlock did not know (each also logged as a warning).
#[derive(Debug)]
struct Parsed {
    config: Config,
    unknown: Vec<String>,
}

impl Config {
    /// The configuration that a Redisson YAML config (what Java's `Config.fromYAML` reads) describes:
    /// its `singleServerConfig`, `clusterServersConfig`, `sentinelServersConfig` or
    /// `masterSlaveServersConfig`, and its lock settings, over rlock's defaults.
    ///
    /// `${VAR}` and `${VAR:-default}` are replaced by environment variables first, as Redisson does.
    /// Redisson settings that do not apply to rlock (threads, codec, pool sizes, read mode, ...) are
    /// skipped; unknown keys are skipped with a `tracing` warning that names them. The README section
    /// "Redisson's config file" lists what maps to what.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] naming the key, e.g. `clusterServersConfig.nodeAddresses[1]`, when
    /// the YAML is malformed, a value is bad or refused (a JKS trust store, client certificates,
    /// `replicatedServersConfig`), an environment variable without a default is unset, or the
    /// file names no topology or several.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let config = rlock_redisson::Config::from_redisson_yaml(
    ///     r#"
    /// singleServerConfig:
    ///   address: "redis://127.0.0.1:6379"
    ///   password: null
    ///   database: 2
    ///   timeout: 5000
    /// lockWatchdogTimeout: 10000
    /// codec: !<org.redisson.codec.Kryo5Codec> {}
    /// "#,
    /// )?;
    /// assert_eq!(config.url, "redis://127.0.0.1:6379/2");
    /// assert_eq!(config.command_timeout, Duration::from_secs(5));
    /// assert_eq!(config.watchdog_timeout, Duration::from_secs(10));
    /// # Ok::<(), rlock_redisson::Error>(())
    /// ```
    pub fn from_redisson_yaml(yaml: &str) -> Result<Self> {
        let parsed = parse(yaml, |name| std::env::var(name).ok())?;
        for key in &parsed.unknown {
            tracing::warn!("Redisson config: unknown key {key} ignored");
        }
        Ok(parsed.config)
    }

    /// [`Config::from_redisson_yaml`] of the file at `path`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] when the file cannot be read, and as
    /// [`Config::from_redisson_yaml`].
    ///
    /// # Examples
    ///
    /// ```
    /// let file = std::env::temp_dir().join(format!("rlock-doc-{}.yaml", std::process::id()));
    /// std::fs::write(&file, "clusterServersConfig:\n  nodeAddresses: [\"redis://10.0.0.1:7000\"]\n")?;
    /// let config = rlock_redisson::Config::from_redisson_yaml_file(&file)?;
    /// std::fs::remove_file(&file)?;
    /// assert_eq!(config.topology, rlock_redisson::Topology::Cluster);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_redisson_yaml_file(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let yaml = std::fs::read_to_string(path).map_err(|e| {
            Error::InvalidArgument(format!(
                "cannot read Redisson config {}: {e}",
                path.display()
            ))
        })?;
        Self::from_redisson_yaml(&yaml)
    }
}

/// Reads a Redisson YAML file, with `env` giving the values of `${VAR}` placeholders.
fn parse(yaml: &str, env: impl Fn(&str) -> Option<String>) -> Result<Parsed> {
    let yaml = substitute(yaml, env)?;
    let mut unknown = Vec::new();
    let file: RedissonYaml =
        serde_ignored::deserialize(serde_yaml_ng::Deserializer::from_str(&yaml), |path| {
            let key = key_path(&path);
            let name = key.rsplit('.').next().unwrap_or_default();
            if let Some((_, reason)) = NOT_MAPPED.iter().find(|(known, _)| *known == name) {
                tracing::warn!("Redisson config: {key} ignored: {reason}");
            } else if !NOT_APPLICABLE.contains(&name) {
                unknown.push(key);
            }
        })
        .map_err(|e| invalid("Redisson config", e))?;

    if file.replicated_servers_config.is_some() {
        return Err(invalid(
            "replicatedServersConfig",
            "not supported: rlock needs to know the master (use masterSlaveServersConfig)",
        ));
    }
    let sections = [
        (Section::Single, file.single_server_config),
        (Section::Cluster, file.cluster_servers_config),
        (Section::Sentinel, file.sentinel_servers_config),
        (Section::MasterSlave, file.master_slave_servers_config),
    ];
    let mut given = sections
        .into_iter()
        .filter_map(|(section, servers)| Some((section, servers?)));
    let (section, servers) = given.next().ok_or_else(|| {
        invalid(
            "Redisson config",
            "no singleServerConfig, clusterServersConfig, sentinelServersConfig or \
             masterSlaveServersConfig",
        )
    })?;
    if let Some((other, _)) = given.next() {
        return Err(invalid(
            other.name(),
            format!(
                "only one topology per file, and {} came first",
                section.name()
            ),
        ));
    }
    unknown.extend(
        servers
            .specific_keys()
            .filter(|key| !section.keys().contains(key))
            .map(|key| format!("{}.{key}", section.name())),
    );

    let mut config = deployment(section, &servers)?;
    apply_connection_settings(&mut config, section.name(), &servers)?;
    let millis =
        |key: &str, value: Option<u64>| value.map(|ms| positive_millis(key, ms)).transpose();
    if let Some(timeout) = millis("lockWatchdogTimeout", file.lock_watchdog_timeout)? {
        config.watchdog_timeout = timeout;
    }
    if let Some(size) = file.lock_watchdog_batch_size {
        config.watchdog_batch_size = size;
    }
    if let Some(check) = file.check_lock_synced_slaves {
        config.check_lock_synced_replicas = check;
    }
    if let Some(timeout) = millis("slavesSyncTimeout", file.slaves_sync_timeout)? {
        config.replicas_sync_timeout = timeout;
    }
    if let Some(timeout) = millis("fairLockWaitTimeout", file.fair_lock_wait_timeout)? {
        config.fair_lock_wait_timeout = timeout;
    }
    // The checks every `Config` passes, in rlock's field names (lockWatchdogTimeout is
    // `watchdog_timeout`).
    config.validate().map_err(|e| match e {
        Error::InvalidArgument(reason) => invalid("Redisson config", reason),
        other => other,
    })?;
    Ok(Parsed { config, unknown })
}

/// The servers of `section`, with their credentials and database in their URLs.
fn deployment(section: Section, servers: &Servers) -> Result<Config> {
    let name = section.name();
    let required = |key: &str, value: Option<&String>| {
        value
            .cloned()
            .ok_or_else(|| invalid(&format!("{name}.{key}"), "missing"))
    };
    let tls = Tls::of(name, servers)?;
    let credentials = Credentials {
        username: non_empty(&servers.username),
        password: non_empty(&servers.password),
    };
    let database = servers.database.filter(|&db| db != 0);
    Ok(match section {
        Section::Single | Section::MasterSlave => {
            let (key, address) = if section == Section::Single {
                ("address", servers.address.as_ref())
            } else {
                ("masterAddress", servers.master_address.as_ref())
            };
            let address = required(key, address)?;
            let url = node_url(
                &format!("{name}.{key}"),
                &address,
                &credentials,
                database,
                tls,
            )?;
            if section == Section::Single {
                Config::new(url)
            } else {
                Config::master_replica(url)
            }
        }
        Section::Cluster => {
            let seeds = required_list(name, "nodeAddresses", servers.node_addresses.as_deref())?;
            let urls = seeds
                .iter()
                .enumerate()
                .map(|(i, seed)| {
                    node_url(
                        &format!("{name}.nodeAddresses[{i}]"),
                        seed,
                        &credentials,
                        None,
                        tls,
                    )
                })
                .collect::<Result<Vec<_>>>()?;
            let mut config = Config::cluster(urls);
            config.nat_map = nat_map(name, servers)?;
            if let Some(mode) = &servers.sharded_subscription_mode {
                config.sharded_pubsub = sharded_pubsub(name, mode)?;
            }
            config
        }
        Section::Sentinel => {
            let sentinels = required_list(
                name,
                "sentinelAddresses",
                servers.sentinel_addresses.as_deref(),
            )?;
            let sentinel_credentials = Credentials {
                username: non_empty(&servers.sentinel_username),
                password: non_empty(&servers.sentinel_password),
            };
            // `Config` would read the master's database from the first sentinel's URL, but the
            // sentinels would then be sent a SELECT, which they reject.
            if database.is_some() {
                return Err(invalid(
                    &format!("{name}.database"),
                    "only database 0 is supported with Sentinel",
                ));
            }
            let urls = sentinels
                .iter()
                .enumerate()
                .map(|(i, sentinel)| {
                    let key = format!("{name}.sentinelAddresses[{i}]");
                    node_url(&key, sentinel, &sentinel_credentials, None, tls)
                })
                .collect::<Result<Vec<_>>>()?;
            let master_name = required("masterName", servers.master_name.as_ref())?;
            let mut config = Config::sentinel(master_name.clone(), urls);
            config.topology = Topology::Sentinel {
                master_name,
                username: credentials.username.map(str::to_owned),
                password: credentials.password.map(str::to_owned),
            };
            if servers.nat_mapper.is_some() {
                return Err(invalid(
                    &format!("{name}.natMapper"),
                    "not supported with Sentinel (rlock maps cluster nodes only)",
                ));
            }
            config
        }
    })
}

/// The settings every section shares: timeouts, retries and the TLS trust store.
fn apply_connection_settings(config: &mut Config, name: &str, servers: &Servers) -> Result<()> {
    let key = |key: &str| format!("{name}.{key}");
    let millis = |field: &str, value: Option<u64>| {
        value.map(|ms| positive_millis(&key(field), ms)).transpose()
    };
    if let Some(timeout) = millis("connectTimeout", servers.connect_timeout)? {
        config.connect_timeout = timeout;
    }
    if let Some(timeout) = millis("timeout", servers.timeout)? {
        config.command_timeout = timeout;
    }
    if let Some(timeout) = millis("subscriptionTimeout", servers.subscription_timeout)? {
        config.subscription_timeout = timeout;
    }
    if let Some(attempts) = servers.retry_attempts {
        config.retry_attempts = attempts;
    }
    // Redisson waits the same interval before every retry: no doubling, so both bounds.
    if let Some(interval) = millis("retryInterval", servers.retry_interval)? {
        config.retry_delay = interval;
        config.retry_max_delay = interval;
    }
    if servers.ssl_keystore.is_some() {
        return Err(invalid(
            &key("sslKeystore"),
            "client certificates (mutual TLS) are not supported by rlock",
        ));
    }
    if let Some(truststore) = &servers.ssl_truststore {
        if matches!(config.topology, Topology::Sentinel { .. }) {
            return Err(invalid(
                &key("sslTruststore"),
                "not supported with Sentinel, where rlock uses the system trust store",
            ));
        }
        config.tls_root_cert = Some(trusted_ca(&key("sslTruststore"), truststore)?);
    }
    Ok(())
}

/// How the file says to verify servers' certificates.
#[derive(Clone, Copy, Debug)]
enum Tls {
    /// Chain and host name (rlock's only way, short of none).
    Verify,
    /// No verification at all (`sslVerificationMode: NONE`): `#insecure` on `rediss://` URLs.
    Insecure,
}

impl Tls {
    fn of(name: &str, servers: &Servers) -> Result<Self> {
        const HOST_NAMES: &str =
            "rlock always verifies the server's host name; certificates must name it";
        if servers.ssl_enable_endpoint_identification == Some(false) {
            tracing::warn!(
                "Redisson config: {name}.sslEnableEndpointIdentification false ignored: {HOST_NAMES}"
            );
        }
        let Some(mode) = &servers.ssl_verification_mode else {
            return Ok(Self::Verify);
        };
        match mode.to_ascii_uppercase().as_str() {
            "STRICT" => Ok(Self::Verify),
            "CA_ONLY" => {
                tracing::warn!(
                    "Redisson config: {name}.sslVerificationMode CA_ONLY ignored: {HOST_NAMES}"
                );
                Ok(Self::Verify)
            }
            "NONE" => Ok(Self::Insecure),
            _ => Err(invalid(
                &format!("{name}.sslVerificationMode"),
                format!("{mode:?} is not STRICT, CA_ONLY or NONE"),
            )),
        }
    }
}

/// A section's credentials, for its URLs.
struct Credentials<'a> {
    username: Option<&'a str>,
    password: Option<&'a str>,
}

/// `address` (`redis://host:port`, `rediss://`, or Valkey's `valkey://` and `valkeys://`) as an
/// rlock URL, with the credentials and database composed in (percent-encoded).
fn node_url(
    key: &str,
    address: &str,
    credentials: &Credentials<'_>,
    database: Option<u32>,
    tls: Tls,
) -> Result<String> {
    let mut url = url::Url::parse(address)
        .map_err(|e| invalid(key, format!("{address:?} is not a redis:// address: {e}")))?;
    let scheme = match url.scheme() {
        "redis" | "valkey" => "redis",
        "rediss" | "valkeys" => "rediss",
        _ => {
            return Err(invalid(
                key,
                format!("{address:?} is not a redis:// or rediss:// address"),
            ));
        }
    };
    if url.host_str().is_none_or(str::is_empty) {
        return Err(invalid(key, format!("{address:?} names no host")));
    }
    let composed = url
        .set_scheme(scheme)
        .and_then(|()| url.set_username(credentials.username.unwrap_or_default()))
        .and_then(|()| url.set_password(credentials.password));
    if composed.is_err() {
        return Err(invalid(
            key,
            format!("{address:?} cannot carry credentials"),
        ));
    }
    url.set_path(&database.map_or_else(|| "/".to_owned(), |db| format!("/{db}")));
    url.set_query(None);
    if scheme == "rediss" && matches!(tls, Tls::Insecure) {
        url.set_fragment(Some("insecure"));
    }
    Ok(url.into())
}

/// The CA certificate of `sslTruststore`: a PEM file (`file:` URL or path). Java's JKS and PKCS#12
/// stores are refused rather than skipped, since connections would then fail on an untrusted CA.
fn trusted_ca(key: &str, truststore: &str) -> Result<Vec<u8>> {
    let path = truststore
        .strip_prefix("file://")
        .or_else(|| truststore.strip_prefix("file:"))
        .unwrap_or(truststore);
    if path.contains("://") || path.starts_with("classpath:") {
        return Err(invalid(key, format!("{truststore:?} is not a file")));
    }
    let pem = std::fs::read(path).map_err(|e| invalid(key, format!("cannot read {path}: {e}")))?;
    if !pem.windows(11).any(|window| window == b"-----BEGIN ") {
        return Err(invalid(
            key,
            format!(
                "{path} is not a PEM certificate: rlock reads PEM, export the CA from a Java \
                 trust store with `keytool -exportcert -rfc`"
            ),
        ));
    }
    Ok(pem)
}

/// `natMap` (old Redisson) and `natMapper` (`HostPortNatMapper`'s `hostsPortMap`).
fn nat_map(name: &str, servers: &Servers) -> Result<HashMap<String, String>> {
    let mut map = servers.nat_map.clone().unwrap_or_default();
    if let Some(mapper) = &servers.nat_mapper {
        if mapper.hosts_map.is_some() {
            return Err(invalid(
                &format!("{name}.natMapper.hostsMap"),
                "HostNatMapper maps hosts without their ports: rlock maps host:port pairs \
                 (HostPortNatMapper's hostsPortMap)",
            ));
        }
        map.extend(mapper.hosts_port_map.clone().unwrap_or_default());
    }
    Ok(map)
}

fn sharded_pubsub(name: &str, mode: &str) -> Result<ShardedPubSub> {
    match mode.to_ascii_uppercase().as_str() {
        "AUTO" => Ok(ShardedPubSub::Auto),
        "ON" => Ok(ShardedPubSub::On),
        "OFF" => Ok(ShardedPubSub::Off),
        _ => Err(invalid(
            &format!("{name}.shardedSubscriptionMode"),
            format!("{mode:?} is not AUTO, ON or OFF"),
        )),
    }
}

fn required_list<'a>(name: &str, key: &str, list: Option<&'a [String]>) -> Result<&'a [String]> {
    match list {
        Some(list) if !list.is_empty() => Ok(list),
        _ => Err(invalid(
            &format!("{name}.{key}"),
            "at least one address is required",
        )),
    }
}

fn positive_millis(key: &str, ms: u64) -> Result<Duration> {
    if ms == 0 {
        return Err(invalid(key, "must be positive"));
    }
    Ok(Duration::from_millis(ms))
}

fn non_empty(value: &Option<String>) -> Option<&str> {
    value.as_deref().filter(|value| !value.is_empty())
}

fn invalid(key: &str, reason: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!("{key}: {reason}"))
}

/// `path` as Redisson spells keys (`clusterServersConfig.natMap`), without serde's `?` for options.
fn key_path(path: &serde_ignored::Path<'_>) -> String {
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

/// Replaces `${VAR}` and `${VAR:-default}` with `env(VAR)` (or the default), as Redisson does
/// before parsing. Hand-written because Redisson's syntax is narrower than a shell's: a lone `$`
/// (common in passwords) stays as it is, which shell-expansion crates would not guarantee.
fn substitute(yaml: &str, env: impl Fn(&str) -> Option<String>) -> Result<String> {
    let mut out = String::with_capacity(yaml.len());
    let mut rest = yaml;
    while let Some(start) = rest.find("${") {
        let Some(len) = rest[start + 2..].find('}') else {
            break;
        };
        let placeholder = &rest[start + 2..start + 2 + len];
        let (name, default) = match placeholder.split_once(":-") {
            Some((name, default)) => (name, Some(default)),
            None => (placeholder, None),
        };
        let value = env(name)
            .or_else(|| default.map(str::to_owned))
            .ok_or_else(|| {
                invalid(
                    &format!("${{{name}}}"),
                    "environment variable not set and no default (${VAR:-default})",
                )
            })?;
        out.push_str(&rest[..start]);
        out.push_str(&value);
        rest = &rest[start + 3 + len..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_ok(yaml: &str) -> Parsed {
        parse(yaml, |_| None).expect("a valid Redisson config")
    }

    fn error(yaml: &str) -> String {
        match parse(yaml, |_| None) {
            Ok(parsed) => panic!("accepted: {:?}", parsed.config),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn placeholders_take_the_environment_then_the_default() {
        let env = |name: &str| (name == "PORT").then(|| "7000".to_owned());
        let yaml = "a: ${PORT} b: ${HOST:-h} c: pa$$word d: ${PORT:-1}";
        assert_eq!(
            substitute(yaml, env).expect("substituted"),
            "a: 7000 b: h c: pa$$word d: 7000"
        );
        assert_eq!(
            substitute("x: ${UNCLOSED", env).expect("kept"),
            "x: ${UNCLOSED"
        );
        let missing = substitute("x: ${NOPE}", env).expect_err("unset without default");
        assert!(missing.to_string().contains("${NOPE}"), "{missing}");
    }

    #[test]
    fn credentials_are_percent_encoded_into_the_url() {
        let parsed = parse_ok(
            "singleServerConfig:\n  address: redis://h:1\n  username: app\n  password: \"p@ss:w/rd\"\n",
        );
        assert_eq!(parsed.config.url, "redis://app:p%40ss%3Aw%2Frd@h:1/");
        let info = redis::IntoConnectionInfo::into_connection_info(parsed.config.url.as_str())
            .expect("redis reads the URL");
        assert_eq!(info.redis_settings().password(), Some("p@ss:w/rd"));
        assert_eq!(info.redis_settings().username(), Some("app"));
    }

    #[test]
    fn valkey_schemes_and_insecure_tls_map_to_redis_urls() {
        let parsed = parse_ok(
            "clusterServersConfig:\n  nodeAddresses: [\"valkeys://a:1\", \"valkey://b:2\"]\n  sslVerificationMode: NONE\n",
        );
        assert_eq!(parsed.config.url, "rediss://a:1/#insecure");
        assert_eq!(parsed.config.nodes, ["redis://b:2/"]);
    }

    #[test]
    fn tags_nulls_and_redisson_only_keys_pass_silently() {
        let parsed = parse_ok(
            "singleServerConfig:\n  address: redis://h:1\n  clientName: null\n  password: null\n  \
             loadBalancer: !<org.redisson.connection.balancer.RoundRobinLoadBalancer> {}\n\
             threads: 16\ncodec: !<org.redisson.codec.Kryo5Codec> {}\ntransportMode: NIO\n",
        );
        assert!(parsed.unknown.is_empty(), "{:?}", parsed.unknown);
        assert_eq!(parsed.config.url, "redis://h:1/");
    }

    #[test]
    fn unknown_and_misplaced_keys_are_reported() {
        let parsed = parse_ok(
            "singleServerConfig:\n  address: redis://h:1\n  nodeAddresses: [redis://x:1]\n  \
             colour: blue\nlockWatchdogTimeot: 5\n",
        );
        let mut unknown = parsed.unknown;
        unknown.sort();
        assert_eq!(
            unknown,
            [
                "lockWatchdogTimeot",
                "singleServerConfig.colour",
                "singleServerConfig.nodeAddresses"
            ]
        );
    }

    #[test]
    fn bad_values_name_their_key() {
        let cases = [
            (
                "clusterServersConfig:\n  nodeAddresses: [\"redis://a:1\", \"http://b:2\"]\n",
                "clusterServersConfig.nodeAddresses[1]",
            ),
            (
                "singleServerConfig:\n  address: redis://h:1\n  timeout: soon\n",
                "singleServerConfig.timeout",
            ),
            (
                "singleServerConfig:\n  address: redis://h:1\n  connectTimeout: 0\n",
                "singleServerConfig.connectTimeout",
            ),
            (
                "singleServerConfig:\n  database: 1\n",
                "singleServerConfig.address",
            ),
            (
                "clusterServersConfig:\n  nodeAddresses: [redis://a:1]\n  shardedSubscriptionMode: SOMETIMES\n",
                "clusterServersConfig.shardedSubscriptionMode",
            ),
            (
                "sentinelServersConfig:\n  sentinelAddresses: [redis://s:1]\n",
                "sentinelServersConfig.masterName",
            ),
            (
                "sentinelServersConfig:\n  sentinelAddresses: [redis://s:1]\n  masterName: m\n  database: 2\n",
                "sentinelServersConfig.database",
            ),
            (
                "sentinelServersConfig:\n  sentinelAddresses: [rediss://s:1]\n  masterName: m\n  sslTruststore: file:/ca.pem\n",
                "sentinelServersConfig.sslTruststore",
            ),
            (
                "singleServerConfig:\n  address: rediss://h:1\n  sslKeystore: file:/k.jks\n",
                "singleServerConfig.sslKeystore",
            ),
            (
                "singleServerConfig:\n  address: redis://h:1\nlockWatchdogTimeout: -5\n",
                "lockWatchdogTimeout",
            ),
            (
                "replicatedServersConfig:\n  nodeAddresses: []\n",
                "replicatedServersConfig",
            ),
            ("codec: !<x> {}\n", "no singleServerConfig"),
            (
                "singleServerConfig:\n  address: redis://h:1\nclusterServersConfig:\n  nodeAddresses: [redis://a:1]\n",
                "only one topology",
            ),
        ];
        for (yaml, key) in cases {
            let message = error(yaml);
            assert!(message.contains(key), "{yaml}: {message}");
        }
    }

    #[test]
    fn a_jks_trust_store_is_refused_and_a_pem_one_trusted() {
        let dir = std::env::temp_dir();
        let pem = dir.join(format!("rlock-ca-{}.pem", std::process::id()));
        let jks = dir.join(format!("rlock-ca-{}.jks", std::process::id()));
        std::fs::write(
            &pem,
            "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
        )
        .expect("write pem");
        std::fs::write(&jks, [0xfe, 0xed, 0xfe, 0xed, 0, 0, 0, 2]).expect("write jks");
        let yaml = |store: &Path| {
            format!(
                "singleServerConfig:\n  address: rediss://h:1\n  sslTruststore: file:{}\n  \
                 sslTruststorePassword: changeit\n",
                store.display()
            )
        };
        let trusted = parse_ok(&yaml(&pem)).config.tls_root_cert;
        let refused = error(&yaml(&jks));
        let _ = (std::fs::remove_file(&pem), std::fs::remove_file(&jks));
        assert!(trusted.is_some_and(|cert| cert.starts_with(b"-----BEGIN")));
        assert!(
            refused.contains("singleServerConfig.sslTruststore") && refused.contains("PEM"),
            "{refused}"
        );
    }

    #[test]
    fn nat_mappers_fill_the_nat_map() {
        let parsed = parse_ok(
            "clusterServersConfig:\n  nodeAddresses: [redis://a:1]\n  natMapper: \
             !<org.redisson.api.HostPortNatMapper> {hostsPortMap: {\"10.0.0.1:7000\": \"127.0.0.1:17000\"}}\n",
        );
        let expected = HashMap::from([("10.0.0.1:7000".to_owned(), "127.0.0.1:17000".to_owned())]);
        assert_eq!(parsed.config.nat_map, expected);
        let old = parse_ok(
            "clusterServersConfig:\n  nodeAddresses: [redis://a:1]\n  natMap: {\"10.0.0.1:7000\": \"127.0.0.1:17000\"}\n",
        );
        assert_eq!(old.config.nat_map, expected);
        let message = error(
            "clusterServersConfig:\n  nodeAddresses: [redis://a:1]\n  natMapper: !<org.redisson.api.HostNatMapper> {hostsMap: {}}\n",
        );
        assert!(
            message.contains("clusterServersConfig.natMapper.hostsMap"),
            "{message}"
        );
    }
}
