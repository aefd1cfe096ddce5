//! The topology options: how the URLs of `--url` make up a deployment (a server, a cluster, a
//! sentinel-watched master, a master with replicas), and the TLS CA to trust.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::ValueEnum as _;

use crate::Result;
use crate::target::GLOBAL;

/// The environment variables of the sentinel master's credentials.
const SENTINEL_USER_ENV: &str = "RLOCK_SENTINEL_USER";
const SENTINEL_PASSWORD_ENV: &str = "RLOCK_SENTINEL_PASSWORD";

#[derive(Clone, Debug, clap::Args)]
pub(crate) struct Topology {
    /// A Redis Cluster: every --url is a seed node.
    #[arg(long, global = true, help_heading = GLOBAL,
          conflicts_with_all = ["sentinel_master", "master_replica"])]
    cluster: bool,
    /// The master that Sentinel calls NAME: every --url is a sentinel.
    #[arg(long, value_name = "NAME", global = true, help_heading = GLOBAL,
          conflicts_with = "master_replica")]
    sentinel_master: Option<String>,
    /// The sentinel master's ACL user (sentinels' own credentials go in their URLs).
    #[arg(long, value_name = "USER", env = SENTINEL_USER_ENV, global = true, hide_env_values = true,
          help_heading = GLOBAL)]
    sentinel_user: Option<String>,
    /// The sentinel master's password.
    #[arg(long, value_name = "PASSWORD", env = SENTINEL_PASSWORD_ENV, global = true,
          hide_env_values = true, help_heading = GLOBAL)]
    sentinel_password: Option<String>,
    /// The --url is a master whose replicas every lock write waits for (WAIT).
    #[arg(long, global = true, help_heading = GLOBAL)]
    master_replica: bool,
    /// Sharded pub/sub (SPUBLISH/SSUBSCRIBE) for unlock messages, with --cluster [default: auto]
    #[arg(long, value_enum, value_name = "MODE", global = true, help_heading = GLOBAL)]
    sharded_pubsub: Option<ShardedPubSub>,
    /// A CA certificate (PEM) to trust for rediss:// URLs instead of the system's.
    #[arg(long, value_name = "FILE", global = true, help_heading = GLOBAL)]
    tls_ca: Option<PathBuf>,
}

/// `--sharded-pubsub`, as Redisson's `shardedSubscriptionMode`.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum ShardedPubSub {
    /// Sharded when the cluster supports it (Redis 7 and later), as Redisson 3.22 and later.
    Auto,
    /// Always sharded.
    On,
    /// Never sharded, as Redisson 3.21 and earlier.
    Off,
}

impl From<ShardedPubSub> for rlock_redisson::ShardedPubSub {
    fn from(mode: ShardedPubSub) -> Self {
        match mode {
            ShardedPubSub::Auto => Self::Auto,
            ShardedPubSub::On => Self::On,
            ShardedPubSub::Off => Self::Off,
        }
    }
}

impl Topology {
    /// The topology option given, if any: they all need URLs from the user.
    pub(crate) fn flag(&self) -> Option<&'static str> {
        if self.cluster {
            Some("--cluster")
        } else if self.sentinel_master.is_some() {
            Some("--sentinel-master")
        } else if self.master_replica {
            Some("--master-replica")
        } else {
            None
        }
    }

    /// Applies the options that refine a deployment (from the URLs or a Redisson config file):
    /// sharded pub/sub, the TLS CA, the sentinel master's credentials.
    pub(crate) fn apply(&self, config: &mut rlock_redisson::Config) -> Result<()> {
        self.check(&config.topology)?;
        if let Some(mode) = self.sharded_pubsub {
            config.sharded_pubsub = mode.into();
        }
        if let Some(file) = &self.tls_ca {
            let pem = std::fs::read(file)
                .map_err(|e| format!("cannot read --tls-ca {}: {e}", file.display()))?;
            config.tls_root_cert = Some(pem);
        }
        if let rlock_redisson::Topology::Sentinel {
            username, password, ..
        } = &mut config.topology
        {
            if let Some(user) = &self.sentinel_user {
                *username = Some(user.clone());
            }
            if let Some(secret) = &self.sentinel_password {
                *password = Some(secret.clone());
            }
        }
        Ok(())
    }

    /// Rejects options that do not apply to the chosen topology, rather than ignoring them.
    fn check(&self, topology: &rlock_redisson::Topology) -> Result<()> {
        use rlock_redisson::Topology::{Cluster, Sentinel};
        let sentinel = matches!(topology, Sentinel { .. });
        if !sentinel && (self.sentinel_user.is_some() || self.sentinel_password.is_some()) {
            return Err(format!(
                "--sentinel-user ({SENTINEL_USER_ENV}) and --sentinel-password \
                 ({SENTINEL_PASSWORD_ENV}) need --sentinel-master"
            )
            .into());
        }
        if sentinel && self.tls_ca.is_some() {
            return Err(
                "--tls-ca does not apply to Sentinel, which uses the system trust store".into(),
            );
        }
        if self.sharded_pubsub.is_some() && *topology != Cluster {
            return Err(
                "--sharded-pubsub needs a cluster (--cluster or a clusterServersConfig)".into(),
            );
        }
        Ok(())
    }

    /// The deployment at `urls` (at least one), as the topology flags say.
    pub(crate) fn deployment(&self, urls: &[String]) -> Result<rlock_redisson::Config> {
        if self.cluster {
            return Ok(rlock_redisson::Config::cluster(urls));
        }
        if let Some(master_name) = &self.sentinel_master {
            return Ok(rlock_redisson::Config::sentinel(master_name, urls));
        }
        let [url] = urls else {
            return Err("several URLs need --cluster or --sentinel-master".into());
        };
        Ok(if self.master_replica {
            rlock_redisson::Config::master_replica(url)
        } else {
            rlock_redisson::Config::new(url)
        })
    }

    /// These options again, for a child process: flags as arguments, secrets as environment
    /// variables (another user can read a process's arguments, not its environment).
    pub(crate) fn forward(&self, command: &mut tokio::process::Command) {
        command.args(self.args());
        for (name, value) in [
            (SENTINEL_USER_ENV, &self.sentinel_user),
            (SENTINEL_PASSWORD_ENV, &self.sentinel_password),
        ] {
            match value {
                Some(value) => command.env(name, value),
                None => command.env_remove(name),
            };
        }
    }

    fn args(&self) -> Vec<OsString> {
        let mut args: Vec<OsString> = Vec::new();
        if self.cluster {
            args.push("--cluster".into());
        }
        if let Some(name) = &self.sentinel_master {
            args.extend(["--sentinel-master".into(), name.into()]);
        }
        if self.master_replica {
            args.push("--master-replica".into());
        }
        if let Some(mode) = self.sharded_pubsub {
            let mode = mode.to_possible_value().map(|v| v.get_name().to_owned());
            args.extend(["--sharded-pubsub".into(), mode.unwrap_or_default().into()]);
        }
        if let Some(file) = &self.tls_ca {
            args.extend(["--tls-ca".into(), file.into()]);
        }
        args
    }
}
