//! The server sections (`singleServerConfig`, `clusterServersConfig`, `sentinelServersConfig`,
//! `masterSlaveServersConfig`): what serde reads of them and of the settings they share with the top
//! level ([`Levels`]), and the servers they name, as rlock URLs with their credentials, database and
//! TLS mode composed in, with the cluster's NAT map and the TLS trust store. Apart from the parsing
//! of the file, since this is where Redisson's addresses become what rlock connects to.

use std::collections::HashMap;

use serde::Deserialize;
use serde::de::IgnoredAny;

use super::java::{DelayFields, Tagged};
use super::keys::{Section, invalid};
use crate::config::{Config, ShardedPubSub, Topology};
use crate::error::Result;

/// One `*ServersConfig` section. The sections share most keys, so one type reads them all and
/// [`Section::keys`] says which of the topology-specific ones each section takes.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct Servers {
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
    pub(super) connect_timeout: Option<u64>,
    pub(super) timeout: Option<u64>,
    pub(super) retry_attempts: Option<u32>,
    pub(super) retry_interval: Option<u64>,
    pub(super) retry_delay: Option<Tagged<DelayFields>>,
    pub(super) subscription_timeout: Option<u64>,
    pub(super) ping_connection_interval: Option<u64>,
}

impl Servers {
    /// The topology-specific keys present in this section.
    pub(super) fn specific_keys(&self) -> impl Iterator<Item = &'static str> {
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

/// The settings Redisson 4.x keeps at the top level of the file and older versions in the server
/// section, where 4.x still reads them (docs/protocol.md §9.1). Where both levels give one, the
/// section's wins and the top level is the fallback, as the contract says; see [`Levels`]. `null`
/// is unset at either level.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct Shared {
    username: Option<String>,
    password: Option<String>,
    pub(super) credentials_resolver: Option<Tagged<IgnoredAny>>,
    pub(super) name_mapper: Option<Tagged<IgnoredAny>>,
    pub(super) command_mapper: Option<Tagged<IgnoredAny>>,
    ssl_verification_mode: Option<String>,
    ssl_enable_endpoint_identification: Option<bool>,
    pub(super) ssl_truststore: Option<String>,
    pub(super) ssl_keystore: Option<String>,
    pub(super) ssl_keystore_password: Option<String>,
    /// Java objects, which Redisson's `toYAML` writes as `null`.
    pub(super) ssl_trust_manager_factory: Option<IgnoredAny>,
    pub(super) ssl_key_manager_factory: Option<IgnoredAny>,
}

/// A `natMapper`'s settings: `hostsPortMap` for `HostPortNatMapper`, `hostsMap` for
/// `HostNatMapper`, none for `DefaultNatMapper` (so the keys tell the class of an untagged one).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct NatMapper {
    hosts_port_map: Option<HashMap<String, String>>,
    hosts_map: Option<IgnoredAny>,
}

/// The [`Shared`] settings of the file's section and of its top level, read with the precedence of
/// docs/protocol.md §9.1: the section's value, else the top level's.
pub(super) struct Levels<'a> {
    /// The section's name, e.g. `singleServerConfig`.
    pub(super) name: &'static str,
    pub(super) section: &'a Shared,
    pub(super) top: &'a Shared,
}

impl<'a> Levels<'a> {
    /// The setting `key` (`field` of [`Shared`]): the section's value when it gives one, else the
    /// top level's (docs/protocol.md §9.1), with the key as the file spells it where it was found
    /// (`sslTruststore` or `singleServerConfig.sslTruststore`), for messages.
    pub(super) fn get<T>(
        &self,
        key: &str,
        field: fn(&Shared) -> &Option<T>,
    ) -> Option<(String, &'a T)> {
        let [top, section] = self.both(key, field);
        section.or(top)
    }

    /// `key`'s value at each level that gives one, each with its key as the file spells it.
    pub(super) fn each<T>(
        &self,
        key: &str,
        field: fn(&Shared) -> &Option<T>,
    ) -> Vec<(String, &'a T)> {
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

/// The servers of `section`, with their credentials and database in their URLs.
pub(super) fn deployment(
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
    let login = ServerLogin {
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
            let url = node_url(&format!("{name}.{key}"), &address, &login, database, tls)?;
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
                        &login,
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
            let sentinel_login = ServerLogin {
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
                    node_url(&key, sentinel, &sentinel_login, None, tls)
                })
                .collect::<Result<Vec<_>>>()?;
            let master_name = required("masterName", servers.master_name.as_ref())?;
            let mut config = Config::sentinel(master_name.clone(), urls);
            config.topology = Topology::Sentinel {
                master_name,
                username: login.username.map(str::to_owned),
                password: login.password.map(str::to_owned),
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

/// The username and password a section gives its servers, for their URLs.
struct ServerLogin<'a> {
    username: Option<&'a str>,
    password: Option<&'a str>,
}

/// `address` (`redis://host:port`, `rediss://`, or Valkey's `valkey://` and `valkeys://`) as an
/// rlock URL, with the credentials and database composed in (percent-encoded).
fn node_url(
    key: &str,
    address: &str,
    login: &ServerLogin<'_>,
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
    let username = username.as_deref().or(login.username);
    let password = password.as_deref().or(login.password);
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

/// The CA certificate of `sslTruststore`: a PEM file (`file:` URL or path). Java's JKS and PKCS#12
/// stores are refused rather than skipped, since connections would then fail on an untrusted CA.
pub(super) fn trusted_ca(key: &str, truststore: &str) -> Result<Vec<u8>> {
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

fn non_empty(value: &Option<String>) -> Option<&str> {
    value.as_deref().filter(|value| !value.is_empty())
}
