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
//!
//! This file reads a file: its placeholders, its top level, the settings every section shares, and
//! the Java objects it may name. The rest is apart:
//!
//! - [`keys`]: the key tables, and how a message names a key.
//! - [`java`]: Java's encodings: class tags, `java.time.Duration` text, `retryDelay` classes.
//! - [`servers`]: the server sections and the servers they name, with credentials, TLS and NAT.
//! - `tests`: the loader as a whole, from YAML text to a `Config`, its warnings and its errors.

use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use serde::de::IgnoredAny;

use self::java::{Tagged, class_tags, retry_delays};
use self::keys::{NOT_APPLICABLE, SHARED, Section, invalid, key_path};
use self::servers::{Levels, Servers, Shared, deployment, trusted_ca};
use crate::codec::Codec;
use crate::config::{Config, Topology};
use crate::error::{Error, Result};

mod java;
mod keys;
mod servers;
#[cfg(test)]
mod tests;

/// The Java classes of Redisson's defaults, which do what rlock does.
const DEFAULT_NAME_MAPPER: &str = "org.redisson.api.DefaultNameMapper";
/// Redisson's default codec, which is rlock's.
const DEFAULT_CODEC: &str = "org.redisson.codec.Kryo5Codec";
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
    /// Names entry locks and group-lock values (`Config::codec`). Its settings are read as a
    /// value (not skipped as `IgnoredAny`, which would report the key as unknown).
    codec: Option<Tagged<serde_yaml_ng::Value>>,
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
    /// The `codec` becomes [`Config::codec`], which names the locks of map entries and set values (a
    /// codec rlock cannot reproduce is kept by its class name, with a warning, and refused when such
    /// a lock is named from a typed key). Redisson settings that do not apply to rlock (threads,
    /// pool sizes, read mode, ...) are skipped; unknown keys, and settings rlock reads but cannot honour in full (e.g. a
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
    /// codec: !<org.redisson.client.codec.StringCodec> {}
    /// "#,
    /// )?;
    /// assert_eq!(config.url, "redis://:s3cret@127.0.0.1:6379/2");
    /// assert_eq!(config.command_timeout, Duration::from_secs(5));
    /// assert_eq!(config.retry_delay, Duration::from_millis(500));
    /// assert_eq!(config.retry_max_delay, Duration::from_secs(4));
    /// assert_eq!(config.watchdog_timeout, Duration::from_secs(10));
    /// assert_eq!(config.codec, rlock_redisson::Codec::String);
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
    let codec_class = file
        .codec
        .as_ref()
        .map(|codec| custom_class("codec", codec, DEFAULT_CODEC));
    if let Some(class) = codec_class.transpose()?.flatten() {
        config.codec = Codec::from_java_class(&class);
        if let Codec::Other(class) = &config.codec {
            warnings.push(format!(
                "codec {class}: rlock cannot reproduce what it writes, so the locks of map \
                 entries and set values, and group locks, can only be named with keys given \
                 as the bytes it writes (EntryKey::Encoded, the CLI's --key-type hex)"
            ));
        }
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
fn custom_class<T>(key: &str, object: &Tagged<T>, default: &str) -> Result<Option<String>> {
    match object.class.as_deref() {
        None => Err(invalid(
            key,
            "names no class: Redisson writes the class as a YAML tag, e.g. !<com.example.Class> {}",
        )),
        Some(class) if class == default => Ok(None),
        Some(class) => Ok(Some(class.to_owned())),
    }
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

fn positive_millis(key: &str, ms: u64) -> Result<Duration> {
    if ms == 0 {
        return Err(invalid(key, "must be positive"));
    }
    Ok(Duration::from_millis(ms))
}
