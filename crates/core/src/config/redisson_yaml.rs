//! [`Config::from_redisson_yaml`]: Redisson's YAML config files (`Config.fromYAML` in Java), so that
//! Java and Rust services share one file.
//!
//! The file is read with serde: the settings rlock has are fields of [`RedissonYaml`],
//! [`Servers`] and [`Shared`]; every other key is reported by `serde_ignored` and is either one of
//! Redisson's own settings that has no meaning here ([`NOT_APPLICABLE`], silent) or unknown (a
//! warning naming it). Settings that rlock reads but cannot honour in full give a warning with the
//! reason, and settings whose loss would break mutual exclusion (a custom `nameMapper`) are refused.
//!
//! Redisson writes Java objects with their class as a YAML tag (`!<org.redisson.config.ConstantDelay>
//! {delay: PT1S}`); [`class_tags`] makes those classes visible to serde, and [`Tagged`] reads them.

use std::collections::HashMap;
use std::fmt;
use std::marker::PhantomData;
use std::path::Path;
use std::time::Duration;

use serde::de::{EnumAccess, IgnoredAny, MapAccess, VariantAccess, Visitor};
use serde::{Deserialize, Deserializer};

use crate::config::{Config, ShardedPubSub, Topology};
use crate::error::{Error, Result};

/// Redisson settings that exist but mean nothing to rlock: thread pools, codecs, connection pools and
/// their idle sizes, read balancing, keep-alives, DNS and cluster scans, Netty hooks, reconnection
/// back-off (rlock opens a new connection on the next command, without one). They are skipped
/// without a word, since Redisson writes most of them into every file it generates.
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

/// The keys of [`Shared`]: read by a pass of their own, at the top level and in the server section.
const SHARED: &[&str] = &[
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

/// The Java classes of Redisson's defaults, which do what rlock does.
const DEFAULT_NAME_MAPPER: &str = "org.redisson.api.DefaultNameMapper";
const DEFAULT_COMMAND_MAPPER: &str = "org.redisson.config.DefaultCommandMapper";
const DEFAULT_CREDENTIALS_RESOLVER: &str = "org.redisson.client.DefaultCredentialsResolver";

/// A Redisson YAML file: the top-level `org.redisson.config.Config` settings rlock has, and the
/// sections of the topologies, each an `S` ([`Servers`], or [`Shared`] for the pass that reads
/// the settings a section shares with the top level).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RedissonYaml<S> {
    single_server_config: Option<S>,
    cluster_servers_config: Option<S>,
    sentinel_servers_config: Option<S>,
    master_slave_servers_config: Option<S>,
    /// Refused: rlock cannot tell which of the nodes is the master.
    replicated_servers_config: Option<IgnoredAny>,
    lock_watchdog_timeout: Option<u64>,
    lock_watchdog_batch_size: Option<usize>,
    check_lock_synced_slaves: Option<bool>,
    slaves_sync_timeout: Option<u64>,
    fair_lock_wait_timeout: Option<u64>,
}

impl<S> RedissonYaml<S> {
    /// The topology sections, taken out of the file, in the order the error for several of them
    /// names them.
    fn take_sections(&mut self) -> [(Section, Option<S>); 4] {
        [
            (Section::Single, self.single_server_config.take()),
            (Section::Cluster, self.cluster_servers_config.take()),
            (Section::Sentinel, self.sentinel_servers_config.take()),
            (
                Section::MasterSlave,
                self.master_slave_servers_config.take(),
            ),
        ]
    }
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
    nat_mapper: Option<Tagged<NatMapper>>,
    sharded_subscription_mode: Option<String>,
    connect_timeout: Option<u64>,
    timeout: Option<u64>,
    retry_attempts: Option<u32>,
    retry_interval: Option<u64>,
    retry_delay: Option<Tagged<DelayFields>>,
    subscription_timeout: Option<u64>,
    ping_connection_interval: Option<u64>,
}

/// The settings Redisson 4.x keeps at the top level of the file and older versions in the server
/// section, where 4.x still reads them (docs/protocol.md §9.1). Where both levels give one, the
/// section's wins and the top level is the fallback, as the contract says; see [`Levels`]. `null`
/// is unset at either level.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct Shared {
    username: Option<String>,
    password: Option<String>,
    credentials_resolver: Option<Tagged<IgnoredAny>>,
    name_mapper: Option<Tagged<IgnoredAny>>,
    command_mapper: Option<Tagged<IgnoredAny>>,
    ssl_verification_mode: Option<String>,
    ssl_enable_endpoint_identification: Option<bool>,
    ssl_truststore: Option<String>,
    ssl_keystore: Option<String>,
    ssl_keystore_password: Option<String>,
    /// Java objects, which Redisson's `toYAML` writes as `null`.
    ssl_trust_manager_factory: Option<IgnoredAny>,
    ssl_key_manager_factory: Option<IgnoredAny>,
}

/// A `natMapper`'s settings: `hostsPortMap` for `HostPortNatMapper`, `hostsMap` for
/// `HostNatMapper`, none for `DefaultNatMapper` (so the keys tell the class of an untagged one).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct NatMapper {
    hosts_port_map: Option<HashMap<String, String>>,
    hosts_map: Option<IgnoredAny>,
}

/// The settings of Redisson's `DelayStrategy` classes (`retryDelay`), as ISO-8601 durations.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct DelayFields {
    delay: Option<String>,
    base_delay: Option<String>,
    max_delay: Option<String>,
}

/// A value Redisson writes with its Java class as a YAML tag, e.g.
/// `!<org.redisson.config.ConstantDelay> {delay: PT1S}`: the class (`None` when untagged) and the
/// value. serde_yaml_ng hands a tagged value to serde as an enum whose variant is the tag, once
/// [`class_tags`] has made the tag one it reports.
#[derive(Debug)]
struct Tagged<T> {
    class: Option<String>,
    value: T,
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Tagged<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        struct TaggedVisitor<T>(PhantomData<T>);

        impl<'de, T: Deserialize<'de>> Visitor<'de> for TaggedVisitor<T> {
            type Value = Tagged<T>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a mapping tagged with a Java class, e.g. !<org.redisson.Class> {}")
            }

            fn visit_enum<A: EnumAccess<'de>>(
                self,
                data: A,
            ) -> std::result::Result<Self::Value, A::Error> {
                let (class, value) = data.variant::<String>()?;
                Ok(Tagged {
                    class: Some(class),
                    value: value.newtype_variant()?,
                })
            }

            fn visit_map<A: MapAccess<'de>>(
                self,
                map: A,
            ) -> std::result::Result<Self::Value, A::Error> {
                let value = T::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
                Ok(Tagged { class: None, value })
            }
        }

        deserializer.deserialize_any(TaggedVisitor(PhantomData))
    }
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

/// The [`Shared`] settings of the file's section and of its top level, read with the precedence of
/// docs/protocol.md §9.1: the section's value, else the top level's.
struct Levels<'a> {
    /// The section's name, e.g. `singleServerConfig`.
    name: &'static str,
    section: &'a Shared,
    top: &'a Shared,
}

impl<'a> Levels<'a> {
    /// The setting `key` (`field` of [`Shared`]): the section's value when it gives one, else the
    /// top level's (docs/protocol.md §9.1), with the key as the file spells it where it was found
    /// (`sslTruststore` or `singleServerConfig.sslTruststore`), for messages.
    fn get<T>(&self, key: &str, field: fn(&Shared) -> &Option<T>) -> Option<(String, &'a T)> {
        let [top, section] = self.both(key, field);
        section.or(top)
    }

    /// `key`'s value at each level that gives one, each with its key as the file spells it.
    fn each<T>(&self, key: &str, field: fn(&Shared) -> &Option<T>) -> Vec<(String, &'a T)> {
        self.both(key, field).into_iter().flatten().collect()
    }

    /// `key`'s value at the top level and in the section, each with its key as the file spells it.
    fn both<T>(&self, key: &str, field: fn(&Shared) -> &Option<T>) -> [Option<(String, &'a T)>; 2] {
        let top = field(self.top).as_ref();
        let section = field(self.section).as_ref();
        [
            top.map(|value| (key.to_owned(), value)),
            section.map(|value| (format!("{}.{key}", self.name), value)),
        ]
    }
}

/// A file's configuration, the keys rlock did not know, and the warnings about the settings it
/// reads but cannot honour in full. `from_redisson_yaml` logs both as `tracing` warnings.
#[derive(Debug)]
struct Parsed {
    config: Config,
    unknown: Vec<String>,
    warnings: Vec<String>,
}

impl Config {
    /// The configuration that a Redisson YAML config (what Java's `Config.fromYAML` reads) describes:
    /// its `singleServerConfig`, `clusterServersConfig`, `sentinelServersConfig` or
    /// `masterSlaveServersConfig`, its lock settings, and the credentials and TLS settings that
    /// Redisson 4.x keeps at the top level (and older files in the section: where both give one,
    /// the section's wins, the top level is the fallback), over rlock's defaults.
    ///
    /// `${VAR}` and `${VAR:-default}` are replaced by environment variables first, as Redisson does.
    /// Redisson settings that do not apply to rlock (threads, codec, pool sizes, read mode, ...) are
    /// skipped; unknown keys, and settings rlock reads but cannot honour in full (e.g. a
    /// `FullJitterDelay` retry delay), are skipped with a `tracing` warning that names them and
    /// says why. The README section "Redisson's config file" lists what maps to what.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] naming the key, e.g. `clusterServersConfig.nodeAddresses[1]`, when
    /// the YAML is malformed, a value is bad or refused (a JKS trust store, client certificates,
    /// `replicatedServersConfig`, a custom `nameMapper`: the keys would differ from the Java
    /// service's, so set the mapping in rlock instead), an environment variable without a default
    /// is unset, or the file names no topology or several.
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
    ///   database: 2
    ///   timeout: 5000
    ///   retryDelay: !<org.redisson.config.EqualJitterDelay> {baseDelay: PT0.5S, maxDelay: PT4S}
    /// password: "s3cret"
    /// lockWatchdogTimeout: 10000
    /// codec: !<org.redisson.codec.Kryo5Codec> {}
    /// "#,
    /// )?;
    /// assert_eq!(config.url, "redis://:s3cret@127.0.0.1:6379/2");
    /// assert_eq!(config.command_timeout, Duration::from_secs(5));
    /// assert_eq!(config.retry_delay, Duration::from_millis(500));
    /// assert_eq!(config.retry_max_delay, Duration::from_secs(4));
    /// assert_eq!(config.watchdog_timeout, Duration::from_secs(10));
    /// # Ok::<(), rlock_redisson::Error>(())
    /// ```
    pub fn from_redisson_yaml(yaml: &str) -> Result<Self> {
        let parsed = parse(yaml, |name| std::env::var(name).ok())?;
        for key in &parsed.unknown {
            tracing::warn!("Redisson config: unknown key {key} ignored");
        }
        for warning in &parsed.warnings {
            tracing::warn!("Redisson config: {warning}");
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
    let yaml = class_tags(&substitute(yaml, env)?)?;
    let mut unknown = Vec::new();
    let mut file: RedissonYaml<Servers> =
        serde_ignored::deserialize(serde_yaml_ng::Deserializer::from_str(&yaml), |path| {
            let key = key_path(&path);
            let name = key.rsplit('.').next().unwrap_or_default();
            // The top level and the sections: where `Shared` reads them.
            let shared = SHARED.contains(&name) && key.split('.').count() <= 2;
            if !shared && !NOT_APPLICABLE.contains(&name) {
                unknown.push(key);
            }
        })
        .map_err(|e| invalid("Redisson config", e))?;
    // The settings of `Shared`, from the top level and from every section.
    let top: Shared = serde_yaml_ng::from_str(&yaml).map_err(|e| invalid("Redisson config", e))?;
    let mut sections: RedissonYaml<Shared> =
        serde_yaml_ng::from_str(&yaml).map_err(|e| invalid("Redisson config", e))?;

    if file.replicated_servers_config.is_some() {
        return Err(invalid(
            "replicatedServersConfig",
            "not supported: rlock needs to know the master (use masterSlaveServersConfig)",
        ));
    }
    let mut given = file
        .take_sections()
        .into_iter()
        .zip(sections.take_sections())
        .filter_map(|((section, servers), (_, shared))| {
            Some((section, servers?, shared.unwrap_or_default()))
        });
    let (section, servers, section_shared) = given.next().ok_or_else(|| {
        invalid(
            "Redisson config",
            "no singleServerConfig, clusterServersConfig, sentinelServersConfig or \
             masterSlaveServersConfig",
        )
    })?;
    if let Some((other, ..)) = given.next() {
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

    let levels = Levels {
        name: section.name(),
        section: &section_shared,
        top: &top,
    };
    let mut warnings = Vec::new();
    check_java_objects(&levels, &mut warnings)?;
    let mut config = deployment(section, &servers, &levels, &mut warnings)?;
    apply_connection_settings(&mut config, &servers, &levels, &mut warnings)?;
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
    Ok(Parsed {
        config,
        unknown,
        warnings,
    })
}

/// The Java objects a file may name by class: `nameMapper` (refused unless Redisson's identity
/// mapper, since ignoring it breaks mutual exclusion), `commandMapper` and `credentialsResolver`
/// (warned about unless Redisson's defaults). Both levels are checked: Redisson uses the top
/// level's object unless it is the default, and the section's otherwise.
fn check_java_objects(levels: &Levels<'_>, warnings: &mut Vec<String>) -> Result<()> {
    for (key, mapper) in levels.each("nameMapper", |shared| &shared.name_mapper) {
        if let Some(class) = custom_class(&key, mapper, DEFAULT_NAME_MAPPER)? {
            return Err(invalid(
                &key,
                format!(
                    "class {class} refused: rlock cannot run Java code, and ignoring the mapper \
                     would make the Java service and rlock use different keys for the same lock \
                     names, so they would not exclude each other; remove nameMapper from the file \
                     given to rlock and set the same mapping in rlock: Config::name_mapper in \
                     code, or the CLI's global --name-prefix PREFIX"
                ),
            ));
        }
    }
    for (key, mapper) in levels.each("commandMapper", |shared| &shared.command_mapper) {
        if let Some(class) = custom_class(&key, mapper, DEFAULT_COMMAND_MAPPER)? {
            warnings.push(format!(
                "{key} {class} ignored: rlock cannot run Java code and sends Redis' own command \
                 names (EVAL, EVALSHA, PUBLISH, ...); if the server renames any of them, rlock's \
                 commands fail"
            ));
        }
    }
    for (key, resolver) in levels.each("credentialsResolver", |shared| &shared.credentials_resolver)
    {
        if let Some(class) = custom_class(&key, resolver, DEFAULT_CREDENTIALS_RESOLVER)? {
            warnings.push(format!(
                "{key} {class} ignored: rlock cannot run Java code; credentials come from \
                 username and password only"
            ));
        }
    }
    Ok(())
}

/// The class of a Java object the file names at `key`, unless it is Redisson's `default`.
fn custom_class(key: &str, object: &Tagged<IgnoredAny>, default: &str) -> Result<Option<String>> {
    match object.class.as_deref() {
        None => Err(invalid(
            key,
            "names no class: Redisson writes the class as a YAML tag, e.g. !<com.example.Class> {}",
        )),
        Some(class) if class == default => Ok(None),
        Some(class) => Ok(Some(class.to_owned())),
    }
}

/// The servers of `section`, with their credentials and database in their URLs.
fn deployment(
    section: Section,
    servers: &Servers,
    levels: &Levels<'_>,
    warnings: &mut Vec<String>,
) -> Result<Config> {
    let name = section.name();
    let required = |key: &str, value: Option<&String>| {
        value
            .cloned()
            .ok_or_else(|| invalid(&format!("{name}.{key}"), "missing"))
    };
    let tls = Tls::of(levels, warnings)?;
    let credential = |key: &str, field: fn(&Shared) -> &Option<String>| {
        let value = levels.get(key, field).map(|(_, value)| value.as_str());
        value.filter(|value| !value.is_empty())
    };
    let credentials = Credentials {
        username: credential("username", |shared| &shared.username),
        password: credential("password", |shared| &shared.password),
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
            let mapper = servers.nat_mapper.as_ref();
            if !mapper
                .map(|mapper| nat_pairs(name, mapper))
                .transpose()?
                .unwrap_or_default()
                .is_empty()
            {
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
fn apply_connection_settings(
    config: &mut Config,
    servers: &Servers,
    levels: &Levels<'_>,
    warnings: &mut Vec<String>,
) -> Result<()> {
    let key = |key: &str| format!("{}.{key}", levels.name);
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
    // Zero turns the keepalive off, as in Redisson.
    if let Some(interval) = servers.ping_connection_interval {
        config.ping_connection_interval = Duration::from_millis(interval);
    }
    if let Some(attempts) = servers.retry_attempts {
        config.retry_attempts = attempts;
    }
    // Redisson's `setRetryInterval` sets `retryDelay` to a ConstantDelay, and the key read last
    // wins; Redisson's own `toYAML` writes `retryDelay` after `retryInterval`, so `retryDelay`
    // wins here.
    let delays = match &servers.retry_delay {
        Some(delay) => retry_delays(&key("retryDelay"), delay, warnings)?,
        None => None,
    };
    let interval = millis("retryInterval", servers.retry_interval)?;
    // A constant interval: no doubling, so both bounds.
    if let Some((first, max)) = delays.or(interval.map(|interval| (interval, interval))) {
        config.retry_delay = first;
        config.retry_max_delay = max;
    }
    let client_certificates = levels
        .get("sslKeystore", |shared| &shared.ssl_keystore)
        .map(|(key, _)| key)
        .or_else(|| {
            let factory = levels.get("sslKeyManagerFactory", |shared| {
                &shared.ssl_key_manager_factory
            });
            factory.map(|(key, _)| key)
        });
    if let Some(key) = client_certificates {
        return Err(invalid(
            &key,
            "client certificates (mutual TLS) are not supported by rlock",
        ));
    }
    // Refused rather than skipped, as a JKS trust store is (see `trusted_ca`).
    if let Some((key, _)) = levels.get("sslTrustManagerFactory", |shared| {
        &shared.ssl_trust_manager_factory
    }) {
        return Err(invalid(
            &key,
            "rlock cannot run Java code: give the CA certificate as a PEM file in sslTruststore",
        ));
    }
    if let Some((key, password)) = levels.get("sslKeystorePassword", |shared| {
        &shared.ssl_keystore_password
    }) && !password.is_empty()
    {
        warnings.push(format!(
            "{key} ignored: client certificates are not supported"
        ));
    }
    if let Some((key, truststore)) = levels.get("sslTruststore", |shared| &shared.ssl_truststore) {
        if matches!(config.topology, Topology::Sentinel { .. }) {
            return Err(invalid(
                &key,
                "not supported with Sentinel, where rlock uses the system trust store",
            ));
        }
        config.tls_root_cert = Some(trusted_ca(&key, truststore)?);
    }
    Ok(())
}

/// rlock's retry delays (`retry_delay`, `retry_max_delay`) for a `retryDelay` object at `key`, or
/// `None` (with a warning) for a class rlock does not know. rlock doubles the delay from
/// `retry_delay` up to `retry_max_delay` and waits half of it plus a random part of the other
/// half: Redisson's `EqualJitterDelay`, exactly.
fn retry_delays(
    key: &str,
    delay: &Tagged<DelayFields>,
    warnings: &mut Vec<String>,
) -> Result<Option<(Duration, Duration)>> {
    let Some(class) = delay.class.as_deref() else {
        return Err(invalid(
            key,
            "names no class: Redisson writes it as a YAML tag, e.g. \
             !<org.redisson.config.EqualJitterDelay> {baseDelay: PT1S, maxDelay: PT2S}",
        ));
    };
    let fields = &delay.value;
    let setting = |field: &str, value: &Option<String>| match value {
        Some(text) => java_duration(&format!("{key}.{field}"), text),
        None => Err(invalid(
            &format!("{key}.{field}"),
            format!("missing ({class})"),
        )),
    };
    let not_for = |field: &str, value: &Option<String>| match value {
        Some(_) => Err(invalid(
            &format!("{key}.{field}"),
            format!("not a setting of {class}"),
        )),
        None => Ok(()),
    };
    let short = class.strip_prefix("org.redisson.config.").unwrap_or(class);
    if short == "ConstantDelay" {
        not_for("baseDelay", &fields.base_delay)?;
        not_for("maxDelay", &fields.max_delay)?;
        let delay = setting("delay", &fields.delay)?;
        return Ok(Some((delay, delay)));
    }
    let differs = match short {
        "EqualJitterDelay" => None,
        "FullJitterDelay" => Some("waits a random time between 0 and the doubled delay"),
        "DecorrelatedJitterDelay" => {
            Some("waits a random time between baseDelay and three times the previous delay")
        }
        _ => {
            warnings.push(format!(
                "{key} {class} ignored: rlock reads Redisson's ConstantDelay, EqualJitterDelay, \
                 FullJitterDelay and DecorrelatedJitterDelay, and cannot run Java code; the retry \
                 delays stay retryInterval's, or rlock's defaults (1 s doubling up to 2 s)"
            ));
            return Ok(None);
        }
    };
    not_for("delay", &fields.delay)?;
    let base = setting("baseDelay", &fields.base_delay)?;
    let max = setting("maxDelay", &fields.max_delay)?;
    if let Some(differs) = differs {
        warnings.push(format!(
            "{key} {short}: {short} {differs}; rlock doubles from baseDelay up to maxDelay and \
             waits half of that plus a random part of the other half (EqualJitterDelay), with the \
             same baseDelay and maxDelay"
        ));
    }
    // Redisson caps every delay at maxDelay, a baseDelay above it included.
    Ok(Some((base.min(max), max)))
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
    fn of(levels: &Levels<'_>, warnings: &mut Vec<String>) -> Result<Self> {
        const HOST_NAMES: &str =
            "rlock always verifies the server's host name; certificates must name it";
        let identification = levels.get("sslEnableEndpointIdentification", |shared| {
            &shared.ssl_enable_endpoint_identification
        });
        if let Some((key, false)) = identification {
            warnings.push(format!("{key} false ignored: {HOST_NAMES}"));
        }
        let mode = levels.get("sslVerificationMode", |shared| {
            &shared.ssl_verification_mode
        });
        let Some((key, mode)) = mode else {
            return Ok(Self::Verify);
        };
        match mode.to_ascii_uppercase().as_str() {
            "STRICT" => Ok(Self::Verify),
            "CA_ONLY" => {
                warnings.push(format!("{key} CA_ONLY ignored: {HOST_NAMES}"));
                Ok(Self::Verify)
            }
            "NONE" => Ok(Self::Insecure),
            _ => Err(invalid(
                &key,
                format!("{mode:?} is not STRICT, CA_ONLY or NONE"),
            )),
        }
    }
}

/// A duration as Java's `Duration.toString` writes it and `Duration.parse` reads it (ISO-8601
/// `PnDTnHnMn.nS`, e.g. `PT1S`, `PT0.1S`, `PT1M30S`, `PT-1.5S`), which Redisson's delays use. Written
/// here because Java's form allows a sign on every part, which general ISO-8601 crates reject;
/// negative totals are refused, since they are delays.
fn java_duration(key: &str, text: &str) -> Result<Duration> {
    let bad = || {
        invalid(
            key,
            format!("{text:?} is not an ISO-8601 duration such as PT1S or PT0.5S"),
        )
    };
    let upper = text.to_ascii_uppercase();
    let (negated, rest) = match upper.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, upper.strip_prefix('+').unwrap_or(&upper)),
    };
    let rest = rest.strip_prefix('P').ok_or_else(bad)?;
    let (days, time) = match rest.split_once('T') {
        Some((days, time)) if !time.is_empty() => (days, time),
        Some(_) => return Err(bad()),
        None => (rest, ""),
    };
    if days.is_empty() && time.is_empty() {
        return Err(bad());
    }
    // Nanoseconds, signed, in i128: no Duration Java can write overflows it.
    let mut total: i128 = 0;
    for (part, units) in [
        (days, &[('D', 86_400)][..]),
        (time, &[('H', 3_600), ('M', 60), ('S', 1)]),
    ] {
        let mut part = part;
        for &(unit, seconds) in units {
            let Some(end) = part.find(unit) else {
                continue;
            };
            let number = &part[..end];
            part = &part[end + 1..];
            let (whole, fraction) = match number.split_once(['.', ',']) {
                Some((whole, fraction)) if unit == 'S' => (whole, fraction),
                Some(_) => return Err(bad()),
                None => (number, ""),
            };
            let (sign, digits) = match whole.strip_prefix('-') {
                Some(digits) => (-1, digits),
                None => (1, whole.strip_prefix('+').unwrap_or(whole)),
            };
            let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
            if digits.is_empty()
                || !all_digits(digits)
                || fraction.len() > 9
                || !all_digits(fraction)
            {
                return Err(bad());
            }
            let whole: i128 = digits.parse().map_err(|_| bad())?;
            let nanos: i128 = format!("{fraction:0<9}").parse().map_err(|_| bad())?;
            total += sign * (whole * seconds * 1_000_000_000 + nanos);
        }
        if !part.is_empty() {
            return Err(bad());
        }
    }
    if negated {
        total = -total;
    }
    let nanos = u64::try_from(total).map_err(|_| {
        invalid(
            key,
            format!("{text:?}: a delay must not be negative or too long"),
        )
    })?;
    Ok(Duration::from_nanos(nanos))
}

/// Makes the Java classes of the file's tags visible to serde: serde_yaml_ng ignores verbatim tags
/// (`!<org.redisson.codec.Kryo5Codec>`, the form Redisson writes) and hands a value with a local
/// tag (`!name`) to serde as an enum whose variant is the name, so each verbatim tag naming a Java
/// class becomes the verbatim form of a local one, `!<!org.redisson.codec.Kryo5Codec>`.
///
/// Tags are found outside quotes and comments where a value starts; a plain (unquoted) value
/// holding ` !<` would look the same, so the file is read with and without the rewrite and must
/// say the same apart from the tags, or it is refused.
fn class_tags(yaml: &str) -> Result<String> {
    #[derive(PartialEq)]
    enum State {
        Plain,
        Single,
        Double,
        Comment,
    }
    let bytes = yaml.as_bytes();
    let mut tagged = String::with_capacity(yaml.len() + 64);
    let mut copied = 0;
    let mut state = State::Plain;
    let mut i = 0;
    while i < bytes.len() {
        let byte = bytes[i];
        let after_space = i == 0 || bytes[i - 1].is_ascii_whitespace();
        let starts_value = after_space || matches!(bytes[i - 1], b'[' | b'{' | b',');
        match state {
            State::Comment if byte == b'\n' => state = State::Plain,
            // `''` is a quote inside a single-quoted value.
            State::Single if byte == b'\'' => match bytes.get(i + 1) {
                Some(b'\'') => i += 1,
                _ => state = State::Plain,
            },
            State::Double if byte == b'\\' => i += 1,
            State::Double if byte == b'"' => state = State::Plain,
            State::Plain if byte == b'#' && after_space => state = State::Comment,
            State::Plain if byte == b'\'' && starts_value => state = State::Single,
            State::Plain if byte == b'"' && starts_value => state = State::Double,
            State::Plain if byte == b'!' && starts_value && bytes.get(i + 1) == Some(&b'<') => {
                let class = yaml[i + 2..].split('>').next().unwrap_or_default();
                let java = |c: char| c.is_alphanumeric() || matches!(c, '.' | '_' | '$');
                if !class.is_empty() && class.chars().all(java) && yaml[i + 2..].contains('>') {
                    tagged.push_str(&yaml[copied..i]);
                    tagged.push_str("!<!");
                    copied = i + 2;
                }
            }
            _ => {}
        }
        i += 1;
    }
    if copied == 0 {
        return Ok(yaml.to_owned());
    }
    tagged.push_str(&yaml[copied..]);
    let value = |yaml: &str| {
        serde_yaml_ng::from_str::<serde_yaml_ng::Value>(yaml)
            .map_err(|e| invalid("Redisson config", e))
    };
    if untagged(value(&tagged)?) != untagged(value(yaml)?) {
        return Err(invalid(
            "Redisson config",
            "an unquoted value holds \" !<\", which reads like a YAML tag: quote it",
        ));
    }
    Ok(tagged)
}

/// `value` without its tags (local ones, which serde_yaml_ng keeps, included).
fn untagged(value: serde_yaml_ng::Value) -> serde_yaml_ng::Value {
    use serde_yaml_ng::Value;
    match value {
        Value::Tagged(tagged) => untagged(tagged.value),
        Value::Sequence(items) => Value::Sequence(items.into_iter().map(untagged).collect()),
        Value::Mapping(map) => Value::Mapping(
            map.into_iter()
                .map(|(key, value)| (untagged(key), untagged(value)))
                .collect(),
        ),
        other => other,
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
    // Credentials written into the address win over the file's, as in Redisson
    // (`Objects.toString(address.getPassword(), config.getPassword())`).
    let username = Some(url.username())
        .filter(|name| !name.is_empty())
        .map(str::to_owned);
    let password = url.password().map(str::to_owned);
    let username = username.as_deref().or(credentials.username);
    let password = password.as_deref().or(credentials.password);
    let composed = url
        .set_scheme(scheme)
        .and_then(|()| url.set_username(username.unwrap_or_default()))
        .and_then(|()| url.set_password(password));
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

/// `natMap` (old Redisson) and `natMapper` (see [`nat_pairs`]).
fn nat_map(name: &str, servers: &Servers) -> Result<HashMap<String, String>> {
    let mut map = servers.nat_map.clone().unwrap_or_default();
    if let Some(mapper) = &servers.nat_mapper {
        map.extend(nat_pairs(name, mapper)?);
    }
    Ok(map)
}

/// The host:port pairs of a `natMapper`: `HostPortNatMapper`'s `hostsPortMap`, none for
/// `DefaultNatMapper` (the identity, which Redisson's `toYAML` writes). Any other class is refused,
/// since connections would go to addresses the mapper would have changed.
fn nat_pairs(name: &str, mapper: &Tagged<NatMapper>) -> Result<HashMap<String, String>> {
    const PORTS: &str =
        "rlock maps host:port pairs (org.redisson.api.HostPortNatMapper's hostsPortMap)";
    let key = format!("{name}.natMapper");
    match mapper.class.as_deref() {
        None | Some("org.redisson.api.DefaultNatMapper" | "org.redisson.api.HostPortNatMapper") => {
        }
        Some("org.redisson.api.HostNatMapper") => {
            return Err(invalid(
                &key,
                format!("HostNatMapper maps hosts without their ports: {PORTS}"),
            ));
        }
        Some(class) => {
            return Err(invalid(
                &key,
                format!("class {class}: rlock cannot run Java code; {PORTS}"),
            ));
        }
    }
    if mapper.value.hosts_map.is_some() {
        return Err(invalid(
            &format!("{key}.hostsMap"),
            format!("HostNatMapper maps hosts without their ports: {PORTS}"),
        ));
    }
    Ok(mapper.value.hosts_port_map.clone().unwrap_or_default())
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

    /// The message of the `InvalidArgument` error `yaml` gives.
    fn error(yaml: &str) -> String {
        match parse(yaml, |_| None) {
            Ok(parsed) => panic!("accepted: {:?}", parsed.config),
            Err(Error::InvalidArgument(message)) => message,
            Err(other) => panic!("not an invalid argument: {other:?}"),
        }
    }

    fn single(extra: &str) -> String {
        format!("singleServerConfig:\n  address: redis://h:1\n{extra}")
    }

    #[test]
    fn serde_yaml_ng_drops_verbatim_tags_so_class_tags_turns_them_into_local_ones() {
        let yaml = "mapper: !<com.example.PrefixMapper> {prefix: \"app:\"}\n";
        #[derive(Debug, Deserialize)]
        struct File {
            mapper: Tagged<serde_yaml_ng::Value>,
        }
        // As written, the class is lost: the value reaches serde as a plain mapping.
        let raw: File = serde_yaml_ng::from_str(yaml).expect("parsed");
        assert_eq!(raw.mapper.class, None);
        let rewritten = class_tags(yaml).expect("rewritten");
        assert_eq!(
            rewritten,
            "mapper: !<!com.example.PrefixMapper> {prefix: \"app:\"}\n"
        );
        // Rewritten, it is an enum whose variant is the class, and the value its content.
        let file: File = serde_yaml_ng::from_str(&rewritten).expect("parsed");
        assert_eq!(
            file.mapper.class.as_deref(),
            Some("com.example.PrefixMapper")
        );
        assert_eq!(file.mapper.value, raw.mapper.value);
    }

    #[test]
    fn class_tags_leave_quotes_comments_and_other_tags_alone() {
        let yaml = "a: \"x !<y>\"\nb: 'it''s !<y>' # !<z>\nc: !<!local> 1\nd: !!str 2\n\
                    e: [!<org.A> {}, !<org.B$Inner> {}]\n";
        assert_eq!(
            class_tags(yaml).expect("rewritten"),
            "a: \"x !<y>\"\nb: 'it''s !<y>' # !<z>\nc: !<!local> 1\nd: !!str 2\n\
             e: [!<!org.A> {}, !<!org.B$Inner> {}]\n"
        );
        let message = class_tags("password: pa ss !<word>\n").expect_err("ambiguous");
        assert!(message.to_string().contains("quote it"), "{message}");
        // Where `!<` is part of a plain value's first word, it is no tag and stays.
        assert_eq!(class_tags("p: a!<b>\n").expect("kept"), "p: a!<b>\n");
    }

    #[test]
    fn java_durations() {
        let ok = [
            ("PT1S", Duration::from_secs(1)),
            ("PT0.1S", Duration::from_millis(100)),
            ("PT0.5S", Duration::from_millis(500)),
            ("PT1M", Duration::from_secs(60)),
            ("PT1H2M3.25S", Duration::from_millis(3_723_250)),
            ("P1DT1S", Duration::from_secs(86_401)),
            ("P2D", Duration::from_secs(172_800)),
            ("PT0S", Duration::ZERO),
            ("pt2s", Duration::from_secs(2)),
            ("PT1,5S", Duration::from_millis(1500)),
            ("PT0.000000001S", Duration::from_nanos(1)),
            // Java writes 30 s less than a minute this way.
            ("PT1M-30S", Duration::from_secs(30)),
            ("-PT-1S", Duration::from_secs(1)),
        ];
        for (text, expected) in ok {
            assert_eq!(java_duration("k", text).ok(), Some(expected), "{text}");
        }
        let bad = [
            "",
            "1S",
            "P",
            "PT",
            "PT1",
            "PTS",
            "PT1.5M",
            "PT1S1M",
            "PT0.1234567891S",
            "P1H",
            "PT-0.5S",
            "-PT1S",
            "PT 1S",
            "PT1.S2",
            "1000",
        ];
        for text in bad {
            let Err(Error::InvalidArgument(message)) = java_duration("x.delay", text) else {
                panic!("{text} accepted");
            };
            assert!(message.starts_with("x.delay: "), "{text}: {message}");
        }
    }

    #[test]
    fn top_level_credentials_are_the_sections_fallback() {
        let url = |yaml: &str| parse_ok(yaml).config.url;
        assert_eq!(
            url(&format!("{}username: app\npassword: pw\n", single(""))),
            "redis://app:pw@h:1/"
        );
        // The section's (deprecated) values still apply alone.
        assert_eq!(
            url(&single("  username: own-user\n  password: own\n")),
            "redis://own-user:own@h:1/"
        );
        // Both given: the section's wins, the top level is the fallback; `null` is unset at
        // either level.
        assert_eq!(
            url(&format!(
                "{}password: top\nusername: null\n",
                single("  password: own\n  username: own-user\n")
            )),
            "redis://own-user:own@h:1/"
        );
        assert_eq!(
            url(&format!(
                "{}password: top\nusername: top-user\n",
                single("  password: own\n")
            )),
            "redis://top-user:own@h:1/"
        );
        assert_eq!(
            url(&format!(
                "{}username: null\npassword: null\n",
                single("  password: own\n")
            )),
            "redis://:own@h:1/"
        );
        assert_eq!(
            url(&format!("{}password: top\n", single("  password: null\n"))),
            "redis://:top@h:1/"
        );
        // A password YAML reads as a number is the text Redisson sends.
        assert_eq!(
            url(&format!("{}password: 012345\n", single(""))),
            "redis://:012345@h:1/"
        );
        let sentinel = parse_ok(
            "sentinelServersConfig:\n  sentinelAddresses: [redis://s:1]\n  masterName: m\n  \
             sentinelPassword: spw\npassword: master pw\nusername: app\n",
        );
        assert_eq!(
            sentinel.config.topology,
            Topology::Sentinel {
                master_name: "m".into(),
                username: Some("app".into()),
                password: Some("master pw".into()),
            }
        );
        assert_eq!(sentinel.config.url, "redis://:spw@s:1/");
        let cluster = parse_ok(
            "clusterServersConfig:\n  nodeAddresses: [redis://a:1, redis://b:2]\npassword: pw\n",
        );
        assert_eq!(cluster.config.url, "redis://:pw@a:1/");
        assert_eq!(cluster.config.nodes, ["redis://:pw@b:2/"]);
        let master_slave =
            parse_ok("masterSlaveServersConfig:\n  masterAddress: redis://m:1\npassword: pw\n");
        assert_eq!(master_slave.config.url, "redis://:pw@m:1/");
    }

    #[test]
    fn top_level_tls_settings_are_the_sections_fallback() {
        let tls = |section: &str, top: &str| {
            let yaml = format!("singleServerConfig:\n  address: rediss://h:1\n{section}{top}");
            parse_ok(&yaml).config.url
        };
        let insecure = "rediss://h:1/#insecure";
        assert_eq!(tls("", "sslVerificationMode: NONE\n"), insecure);
        assert_eq!(tls("  sslVerificationMode: NONE\n", ""), insecure);
        // The section's mode wins, the top level's is the fallback.
        assert_eq!(
            tls(
                "  sslVerificationMode: STRICT\n",
                "sslVerificationMode: NONE\n"
            ),
            "rediss://h:1/"
        );
        assert_eq!(
            tls(
                "  sslVerificationMode: null\n",
                "sslVerificationMode: NONE\n"
            ),
            insecure
        );
        assert_eq!(
            tls(
                "  sslVerificationMode: NONE\n",
                "sslVerificationMode: STRICT\n"
            ),
            insecure
        );
        assert_eq!(
            tls(
                "  sslVerificationMode: STRICT\n",
                "sslVerificationMode: null\n"
            ),
            "rediss://h:1/"
        );
        // Java objects that Redisson writes as null pass; others are refused.
        assert_eq!(
            tls(
                "  sslKeyManagerFactory: null\n",
                "sslTrustManagerFactory: null\n"
            ),
            "rediss://h:1/"
        );
        let factory = error(&format!(
            "{}sslTrustManagerFactory: !<javax.net.ssl.TrustManagerFactory> {{}}\n",
            single("")
        ));
        assert!(
            factory.starts_with("sslTrustManagerFactory: rlock cannot run Java code"),
            "{factory}"
        );
        let factory = error(&single(
            "  sslKeyManagerFactory: !<javax.net.ssl.KeyManagerFactory> {}\n",
        ));
        assert!(
            factory.starts_with("singleServerConfig.sslKeyManagerFactory: client certificates"),
            "{factory}"
        );
        // Both levels name a trust store: the section's is read.
        let both = error(&format!(
            "{}sslTruststore: file:/nonexistent/top.pem\n",
            single("  sslTruststore: file:/nonexistent/section.pem\n")
        ));
        assert!(
            both.starts_with(
                "singleServerConfig.sslTruststore: cannot read /nonexistent/section.pem"
            ),
            "{both}"
        );
        // Refusals name the key where the value was found.
        let keystore = error(&format!("{}sslKeystore: file:/k.jks\n", single("")));
        assert!(keystore.starts_with("sslKeystore: "), "{keystore}");
        let keystore = error(&single("  sslKeystore: file:/k.jks\n"));
        assert!(
            keystore.starts_with("singleServerConfig.sslKeystore: "),
            "{keystore}"
        );
        let mode = error(&format!("{}sslVerificationMode: SOMETIMES\n", single("")));
        assert!(mode.starts_with("sslVerificationMode: "), "{mode}");
        let sentinel = error(
            "sentinelServersConfig:\n  sentinelAddresses: [rediss://s:1]\n  masterName: m\n\
             sslTruststore: file:/ca.pem\n",
        );
        assert!(
            sentinel.starts_with("sslTruststore: not supported with Sentinel"),
            "{sentinel}"
        );
    }

    #[test]
    fn retry_delay_objects_map_to_rlocks_retry_delays() {
        let delays = |extra: &str| {
            let parsed = parse_ok(&single(extra));
            let config = parsed.config;
            (config.retry_delay, config.retry_max_delay, parsed.warnings)
        };
        let ms = Duration::from_millis;
        assert_eq!(
            delays(
                "  retryDelay: !<org.redisson.config.EqualJitterDelay> {baseDelay: PT0.1S, maxDelay: PT1M}\n"
            ),
            (ms(100), ms(60_000), vec![])
        );
        assert_eq!(
            delays("  retryDelay: !<org.redisson.config.ConstantDelay> {delay: PT0.5S}\n"),
            (ms(500), ms(500), vec![])
        );
        // A baseDelay above maxDelay: Redisson waits maxDelay (then jitter) every time.
        assert_eq!(
            delays(
                "  retryDelay: !<org.redisson.config.EqualJitterDelay> {baseDelay: PT3S, maxDelay: PT2S}\n"
            ),
            (ms(2000), ms(2000), vec![])
        );
        // retryDelay wins over the deprecated retryInterval, which alone still applies.
        assert_eq!(
            delays(
                "  retryInterval: 1500\n  retryDelay: !<org.redisson.config.EqualJitterDelay> {baseDelay: PT1S, maxDelay: PT2S}\n"
            ),
            (ms(1000), ms(2000), vec![])
        );
        assert_eq!(delays("  retryInterval: 700\n"), (ms(700), ms(700), vec![]));
        let (first, max, warnings) = delays(
            "  retryDelay: !<org.redisson.config.FullJitterDelay> {baseDelay: PT0.2S, maxDelay: PT4S}\n",
        );
        assert_eq!((first, max), (ms(200), ms(4000)));
        assert_eq!(
            warnings,
            [
                "singleServerConfig.retryDelay FullJitterDelay: FullJitterDelay waits a random time \
              between 0 and the doubled delay; rlock doubles from baseDelay up to maxDelay and \
              waits half of that plus a random part of the other half (EqualJitterDelay), with \
              the same baseDelay and maxDelay"
            ]
        );
        let (first, max, warnings) = delays(
            "  retryDelay: !<org.redisson.config.DecorrelatedJitterDelay> {baseDelay: PT1S, maxDelay: PT8S}\n",
        );
        assert_eq!((first, max), (ms(1000), ms(8000)));
        assert_eq!(warnings.len(), 1);
        assert!(
            warnings[0].starts_with("singleServerConfig.retryDelay DecorrelatedJitterDelay: ")
                && warnings[0].contains("three times the previous delay"),
            "{warnings:?}"
        );
        // A class of the service's own: rlock keeps retryInterval's delays.
        let (first, max, warnings) =
            delays("  retryInterval: 900\n  retryDelay: !<com.example.MyDelay> {factor: 3}\n");
        assert_eq!((first, max), (ms(900), ms(900)));
        assert_eq!(warnings.len(), 1);
        assert!(
            warnings[0].starts_with("singleServerConfig.retryDelay com.example.MyDelay ignored: "),
            "{warnings:?}"
        );
        for (extra, key) in [
            (
                "  retryDelay: {baseDelay: PT1S, maxDelay: PT2S}\n",
                "singleServerConfig.retryDelay: names no class",
            ),
            (
                "  retryDelay: !<org.redisson.config.ConstantDelay> {}\n",
                "singleServerConfig.retryDelay.delay: missing",
            ),
            (
                "  retryDelay: !<org.redisson.config.EqualJitterDelay> {baseDelay: PT1S}\n",
                "singleServerConfig.retryDelay.maxDelay: missing",
            ),
            (
                "  retryDelay: !<org.redisson.config.ConstantDelay> {delay: PT1S, maxDelay: PT2S}\n",
                "singleServerConfig.retryDelay.maxDelay: not a setting",
            ),
            (
                "  retryDelay: !<org.redisson.config.EqualJitterDelay> {baseDelay: 1000, maxDelay: PT2S}\n",
                "singleServerConfig.retryDelay.baseDelay: \"1000\" is not",
            ),
        ] {
            let message = error(&single(extra));
            assert!(message.starts_with(key), "{extra}: {message}");
        }
    }

    #[test]
    fn reconnection_delays_and_default_java_objects_pass_silently() {
        let parsed = parse_ok(&format!(
            "{}nameMapper: !<org.redisson.api.DefaultNameMapper> {{}}\n\
             commandMapper: !<org.redisson.config.DefaultCommandMapper> {{}}\n\
             credentialsResolver: !<org.redisson.client.DefaultCredentialsResolver> {{}}\n",
            single(
                "  reconnectionDelay: !<org.redisson.config.EqualJitterDelay> {baseDelay: PT0.1S, maxDelay: PT10S}\n  \
                 nameMapper: null\n  commandMapper: !<org.redisson.config.DefaultCommandMapper> {}\n"
            )
        ));
        assert!(parsed.unknown.is_empty(), "{:?}", parsed.unknown);
        assert!(parsed.warnings.is_empty(), "{:?}", parsed.warnings);
    }

    #[test]
    fn a_custom_name_mapper_is_refused_at_either_level() {
        for (yaml, key) in [
            (
                format!(
                    "{}nameMapper: !<com.example.PrefixMapper> {{prefix: \"app:\"}}\n",
                    single("")
                ),
                "nameMapper: ",
            ),
            (
                single("  nameMapper: !<com.example.PrefixMapper> {prefix: \"app:\"}\n"),
                "singleServerConfig.nameMapper: ",
            ),
        ] {
            let message = error(&yaml);
            assert!(message.starts_with(key), "{message}");
            for part in [
                "com.example.PrefixMapper",
                "cannot run Java code",
                "not exclude each other",
                "Config::name_mapper",
                "--name-prefix PREFIX",
            ] {
                assert!(message.contains(part), "{part}: {message}");
            }
        }
        let message = error(&format!("{}nameMapper: {{prefix: x}}\n", single("")));
        assert!(
            message.starts_with("nameMapper: names no class"),
            "{message}"
        );
    }

    #[test]
    fn every_warning() {
        let parsed = parse_ok(&format!(
            "{}commandMapper: !<com.example.Renamer> {{}}\n\
             credentialsResolver: !<com.example.Iam> {{region: eu}}\n\
             sslKeystorePassword: secret\nsslVerificationMode: CA_ONLY\n\
             sslEnableEndpointIdentification: false\n",
            "singleServerConfig:\n  address: rediss://h:1\n  \
             retryDelay: !<org.redisson.config.FullJitterDelay> {baseDelay: PT1S, maxDelay: PT2S}\n  \
             credentialsResolver: !<com.example.Vault> {}\n  colour: blue\n"
        ));
        assert_eq!(parsed.unknown, ["singleServerConfig.colour"]);
        let rlock_commands = "ignored: rlock cannot run Java code and sends Redis' own command \
                              names (EVAL, EVALSHA, PUBLISH, ...); if the server renames any of \
                              them, rlock's commands fail";
        let credentials = "ignored: rlock cannot run Java code; credentials come from username \
                           and password only";
        let host_names = "ignored: rlock always verifies the server's host name; certificates \
                          must name it";
        assert_eq!(
            parsed.warnings,
            [
                format!("commandMapper com.example.Renamer {rlock_commands}"),
                format!("credentialsResolver com.example.Iam {credentials}"),
                format!("singleServerConfig.credentialsResolver com.example.Vault {credentials}"),
                format!("sslEnableEndpointIdentification false {host_names}"),
                format!("sslVerificationMode CA_ONLY {host_names}"),
                "singleServerConfig.retryDelay FullJitterDelay: FullJitterDelay waits a random \
                 time between 0 and the doubled delay; rlock doubles from baseDelay up to \
                 maxDelay and waits half of that plus a random part of the other half \
                 (EqualJitterDelay), with the same baseDelay and maxDelay"
                    .to_owned(),
                "sslKeystorePassword ignored: client certificates are not supported".to_owned(),
            ]
        );
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
    fn credentials_in_the_address_win_over_the_files() {
        let url = |yaml: &str| parse_ok(yaml).config.url;
        let address = "singleServerConfig:\n  address: \"redis://own:p%40ss@h:1\"\n";
        assert_eq!(url(address), "redis://own:p%40ss@h:1/");
        assert_eq!(
            url(&format!("{address}username: app\npassword: pw\n")),
            "redis://own:p%40ss@h:1/"
        );
        assert_eq!(
            url("singleServerConfig:\n  address: \"redis://:p%40ss@h:1\"\nusername: app\n"),
            "redis://app:p%40ss@h:1/"
        );
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
            "clusterServersConfig:\n  nodeAddresses: [redis://a:1]\n  natMapper: {hostsMap: {}}\n",
        );
        assert!(
            message.contains("clusterServersConfig.natMapper.hostsMap"),
            "{message}"
        );
        let message = error(
            "clusterServersConfig:\n  nodeAddresses: [redis://a:1]\n  natMapper: !<org.redisson.api.HostNatMapper> {hostsMap: {}}\n",
        );
        assert!(
            message.starts_with("clusterServersConfig.natMapper: HostNatMapper"),
            "{message}"
        );
        let message = error(
            "clusterServersConfig:\n  nodeAddresses: [redis://a:1]\n  natMapper: !<com.example.K8sMapper> {}\n",
        );
        assert!(
            message.starts_with("clusterServersConfig.natMapper: class com.example.K8sMapper"),
            "{message}"
        );
        // The identity, which Redisson writes into every file, also with Sentinel.
        let identity = "natMapper: !<org.redisson.api.DefaultNatMapper> {}\n";
        let cluster = parse_ok(&format!(
            "clusterServersConfig:\n  nodeAddresses: [redis://a:1]\n  {identity}"
        ));
        assert!(cluster.config.nat_map.is_empty());
        let sentinel = parse_ok(&format!(
            "sentinelServersConfig:\n  sentinelAddresses: [redis://s:1]\n  masterName: m\n  {identity}"
        ));
        assert!(sentinel.unknown.is_empty(), "{:?}", sentinel.unknown);
        let message = error(
            "sentinelServersConfig:\n  sentinelAddresses: [redis://s:1]\n  masterName: m\n  natMapper: \
             !<org.redisson.api.HostPortNatMapper> {hostsPortMap: {\"a:1\": \"b:2\"}}\n",
        );
        assert!(
            message.starts_with("sentinelServersConfig.natMapper: not supported"),
            "{message}"
        );
    }
}
