//! The global options: which Redis to talk to, and how.

use std::path::PathBuf;
use std::time::Duration;

use crate::Result;
use crate::topology::Topology;

pub(crate) const GLOBAL: &str = "Global options";
/// The environment variable of the URLs, comma-separated.
const URL_ENV: &str = "REDIS_URL";

/// The Redis every command talks to.
#[derive(Clone, Debug, clap::Args)]
pub(crate) struct Target {
    /// The Redis URL, e.g. redis://127.0.0.1:6379/; repeat it (or separate URLs with commas) for
    /// several cluster seeds or sentinels. `demo` starts a private server without one.
    #[arg(long = "url", value_name = "URL", env = URL_ENV, value_delimiter = ',', global = true,
          hide_env_values = true, help_heading = GLOBAL)]
    urls: Vec<String>,
    /// A Redisson YAML config file (singleServerConfig, clusterServersConfig, ...): its servers
    /// stand in for --url, its settings (lockWatchdogTimeout, ...) for the defaults. Options given
    /// on the command line, and REDIS_URL, take precedence over it.
    #[arg(long, value_name = "FILE", global = true, help_heading = GLOBAL)]
    redisson_config: Option<PathBuf>,
    #[command(flatten)]
    topology: Topology,
    /// The lease of locks held without one, renewed every third of it while held [default: 30000,
    /// or the --redisson-config file's lockWatchdogTimeout]
    #[arg(long, value_name = "MS", global = true, help_heading = GLOBAL)]
    watchdog_ms: Option<u64>,
    /// Every task races for a lock in Redis on its own, as Redisson's do, instead of queueing
    /// behind the other tasks of this process and being passed the lock by them (local hand-off).
    #[arg(long, global = true, help_heading = GLOBAL)]
    no_local_handoff: bool,
    /// Puts PREFIX in front of every name before its keys and channels are derived, as a Java
    /// service's prefix NameMapper does (app: makes NAME app:NAME): every command works on the
    /// names under the prefix.
    #[arg(long, value_name = "PREFIX", global = true, allow_hyphen_values = true,
          help_heading = GLOBAL)]
    name_prefix: Option<String>,
}

impl Target {
    /// The URLs given with `--url` or `REDIS_URL`.
    fn urls(&self) -> Vec<String> {
        let urls = self.urls.iter().filter(|url| !url.is_empty());
        urls.cloned().collect()
    }

    /// Whether a Redis was named: URLs or a Redisson config file.
    pub(crate) fn is_given(&self) -> bool {
        !self.urls().is_empty() || self.redisson_config.is_some()
    }

    /// Fails when the options describe a deployment of several servers, which needs URLs.
    pub(crate) fn check_single(&self) -> Result<()> {
        match self.topology.flag() {
            Some(flag) => Err(format!("{flag} needs --url or {URL_ENV}").into()),
            None => Ok(()),
        }
    }

    /// This target on the server at `url` instead.
    pub(crate) fn with_url(&self, url: String) -> Self {
        Self {
            urls: vec![url],
            ..self.clone()
        }
    }

    /// The rlock configuration of these options: the command line (and `REDIS_URL`) over the
    /// Redisson config file over rlock's defaults.
    pub(crate) fn config(&self) -> Result<rlock_redisson::Config> {
        let urls = self.urls();
        let file = match &self.redisson_config {
            Some(path) => Some(rlock_redisson::Config::from_redisson_yaml_file(path)?),
            None => None,
        };
        let mut config = match (file, urls.is_empty()) {
            (None, true) => {
                return Err(format!(
                    "no Redis URL: pass --url, set {URL_ENV} or pass --redisson-config"
                )
                .into());
            }
            (Some(file), true) => {
                // The topology flags say how to read the URLs; the file names its own topology.
                if let Some(flag) = self.topology.flag() {
                    return Err(format!(
                        "{flag} needs --url or {URL_ENV}: the --redisson-config file names its \
                         own topology"
                    )
                    .into());
                }
                file
            }
            (file, false) => {
                let deployment = self.topology.deployment(&urls)?;
                match file {
                    // The file's settings, on the servers of the URLs.
                    Some(mut file) => {
                        file.url = deployment.url;
                        file.nodes = deployment.nodes;
                        file.topology = deployment.topology;
                        file
                    }
                    None => deployment,
                }
            }
        };
        self.topology.apply(&mut config)?;
        if let Some(ms) = self.watchdog_ms {
            config.watchdog_timeout = Duration::from_millis(ms);
        }
        config.local_handoff = !self.no_local_handoff;
        if let Some(prefix) = &self.name_prefix {
            config.name_mapper = Some(rlock_redisson::NameMapper::prefix(prefix.as_str()));
        }
        Ok(config)
    }

    /// What entry names need, without connecting: the codec (the --redisson-config file's, else
    /// Redisson's default) and the name mapper (--name-prefix).
    pub(crate) fn naming(
        &self,
    ) -> Result<(rlock_redisson::Codec, Option<rlock_redisson::NameMapper>)> {
        let codec = match &self.redisson_config {
            Some(path) => rlock_redisson::Config::from_redisson_yaml_file(path)?.codec,
            None => rlock_redisson::Codec::default(),
        };
        let mapper = self
            .name_prefix
            .as_deref()
            .map(rlock_redisson::NameMapper::prefix);
        Ok((codec, mapper))
    }

    /// An rlock client of [`Target::config`].
    pub(crate) async fn client(&self) -> Result<rlock_redisson::Client> {
        Ok(rlock_redisson::Client::with_config(self.config()?).await?)
    }

    /// These options again, for a child process of this binary (the URLs, which may hold passwords,
    /// through the environment).
    pub(crate) fn forward(&self, command: &mut tokio::process::Command) {
        if let Some(ms) = self.watchdog_ms {
            command.arg("--watchdog-ms").arg(ms.to_string());
        }
        if let Some(file) = &self.redisson_config {
            command.arg("--redisson-config").arg(file);
        }
        match self.urls().as_slice() {
            [] => command.env_remove(URL_ENV),
            urls => command.env(URL_ENV, urls.join(",")),
        };
        if self.no_local_handoff {
            command.arg("--no-local-handoff");
        }
        if let Some(prefix) = &self.name_prefix {
            // One argument: a prefix that starts with `-` cannot be taken for an option.
            command.arg(format!("--name-prefix={prefix}"));
        }
        self.topology.forward(command);
    }
}

#[cfg(test)]
mod tests {
    use rlock_redisson::{ShardedPubSub, Topology};

    use super::*;

    const SEEDS: [&str; 2] = ["redis://127.0.0.1:7000/", "redis://127.0.0.1:7001/"];

    fn target(options: &[&str]) -> Target {
        use clap::{CommandFactory as _, FromArgMatches as _};
        let args = ["rlock"].iter().chain(options).chain(&["inspect", "x"]);
        // Parsed as if REDIS_URL were unset (the test command sets it for the doc tests), so that
        // only the options a test passes count.
        let command = crate::Cli::command().mut_arg("urls", |url| url.env(None));
        let matches = command.try_get_matches_from(args).expect("valid options");
        crate::Cli::from_arg_matches(&matches)
            .expect("valid options")
            .target
    }

    /// The options a child of `target` gets, with the URLs it would read from the environment.
    fn forwarded(target: &Target) -> (Vec<String>, Vec<(String, String)>) {
        let mut command = tokio::process::Command::new("rlock");
        target.forward(&mut command);
        let command = command.as_std();
        let args = command.get_args().map(|a| a.to_string_lossy().into_owned());
        let env = command.get_envs().filter_map(|(name, value)| {
            Some((name.to_str()?.to_owned(), value?.to_str()?.to_owned()))
        });
        (args.collect(), env.collect())
    }

    #[test]
    fn cluster_seeds_and_sharded_mode_reach_the_config() {
        let config = target(&[
            "--cluster",
            "--sharded-pubsub",
            "off",
            "--url",
            SEEDS[0],
            "--url",
            SEEDS[1],
        ])
        .config()
        .expect("a cluster config");
        assert_eq!(config.topology, Topology::Cluster);
        assert_eq!(config.url, SEEDS[0]);
        assert_eq!(config.nodes, [SEEDS[1]]);
        assert_eq!(config.sharded_pubsub, ShardedPubSub::Off);
    }

    #[test]
    fn local_handoff_is_on_unless_turned_off_and_children_inherit_it() {
        let url = ["--url", SEEDS[0]];
        assert!(target(&url).config().expect("config").local_handoff);
        let off = target(&[url[0], url[1], "--no-local-handoff"]);
        assert!(!off.config().expect("config").local_handoff);
        let (args, _) = forwarded(&off);
        assert!(
            args.iter().any(|arg| arg == "--no-local-handoff"),
            "{args:?}"
        );
        let (args, _) = forwarded(&target(&url));
        assert!(
            !args.iter().any(|arg| arg == "--no-local-handoff"),
            "{args:?}"
        );
    }

    #[test]
    fn sentinel_credentials_reach_children_through_the_environment_only() {
        let parent = target(&[
            "--sentinel-master",
            "m",
            "--sentinel-user",
            "u",
            "--sentinel-password",
            "secret",
            "--url",
            SEEDS[0],
            "--url",
            SEEDS[1],
        ]);
        let expected = Topology::Sentinel {
            master_name: "m".into(),
            username: Some("u".into()),
            password: Some("secret".into()),
        };
        assert_eq!(
            parent.config().expect("a sentinel config").topology,
            expected
        );

        let (args, env) = forwarded(&parent);
        assert!(!args.iter().any(|arg| arg.contains("secret")), "{args:?}");
        assert!(env.contains(&("RLOCK_SENTINEL_PASSWORD".into(), "secret".into())));
        assert!(env.contains(&(URL_ENV.into(), SEEDS.join(","))));
        // The child parses the same options back (its URLs given explicitly here).
        let mut child_args: Vec<&str> = args.iter().map(String::as_str).collect();
        child_args.extend(["--sentinel-user", "u", "--sentinel-password", "secret"]);
        child_args.extend(["--url", SEEDS[0], "--url", SEEDS[1]]);
        let child = target(&child_args).config().expect("the child's config");
        assert_eq!(child.topology, expected);
        assert_eq!(child.nodes, [SEEDS[1]]);
    }

    #[test]
    fn the_name_prefix_maps_names_in_the_config_and_reaches_children() {
        let url = ["--url", SEEDS[0]];
        assert_eq!(target(&url).config().expect("config").name_mapper, None);
        let prefixed = target(&[url[0], url[1], "--name-prefix", "-app:"]);
        let mapper = prefixed.config().expect("config").name_mapper;
        assert_eq!(mapper, Some(rlock_redisson::NameMapper::prefix("-app:")));
        let (args, env) = forwarded(&prefixed);
        assert_eq!(args, ["--name-prefix=-app:"]);
        assert!(env.contains(&(URL_ENV.into(), SEEDS[0].into())), "{env:?}");
        // The child parses it back (its URL given explicitly here).
        let mut child_args: Vec<&str> = args.iter().map(String::as_str).collect();
        child_args.extend(url);
        let child = target(&child_args).config().expect("the child's config");
        assert_eq!(child.name_mapper, mapper);
    }

    /// A Redisson cluster config in a temporary file, with a 4 s watchdog timeout.
    fn cluster_file() -> tempfile::NamedTempFile {
        let mut file = tempfile::NamedTempFile::new().expect("temporary file");
        let yaml = format!(
            "clusterServersConfig:\n  nodeAddresses: [\"{}\", \"{}\"]\n  \
             shardedSubscriptionMode: \"ON\"\nlockWatchdogTimeout: 4000\n",
            SEEDS[0].trim_end_matches('/'),
            SEEDS[1].trim_end_matches('/'),
        );
        std::io::Write::write_all(&mut file, yaml.as_bytes()).expect("write the config");
        file
    }

    #[test]
    fn the_command_line_beats_the_redisson_config_which_beats_the_defaults() {
        let file = cluster_file();
        let path = file.path().to_str().expect("UTF-8 path");
        let from_file = target(&["--redisson-config", path])
            .config()
            .expect("config");
        assert_eq!(from_file.topology, Topology::Cluster);
        assert_eq!(from_file.url, SEEDS[0]);
        assert_eq!(from_file.nodes, [SEEDS[1]]);
        assert_eq!(from_file.sharded_pubsub, ShardedPubSub::On);
        assert_eq!(from_file.watchdog_timeout, Duration::from_secs(4));

        let flags = [
            "--redisson-config",
            path,
            "--watchdog-ms",
            "900",
            "--sharded-pubsub",
            "off",
        ];
        let overridden = target(&flags).config().expect("config");
        assert_eq!(overridden.watchdog_timeout, Duration::from_millis(900));
        assert_eq!(overridden.sharded_pubsub, ShardedPubSub::Off);

        // A URL replaces the file's servers (and topology) but keeps its settings.
        let single = target(&["--redisson-config", path, "--url", "redis://10.0.0.9:6379/"]);
        let single = single.config().expect("config");
        assert_eq!(
            (single.url.as_str(), single.topology),
            ("redis://10.0.0.9:6379/", Topology::Single)
        );
        assert!(single.nodes.is_empty());
        assert_eq!(single.watchdog_timeout, Duration::from_secs(4));

        let defaults = target(&["--url", SEEDS[0]]).config().expect("config");
        assert_eq!(defaults.watchdog_timeout, Duration::from_secs(30));
    }

    #[test]
    fn topology_flags_need_urls_even_with_a_redisson_config() {
        let file = cluster_file();
        let path = file.path().to_str().expect("UTF-8 path");
        let error = target(&["--redisson-config", path, "--cluster"])
            .config()
            .expect_err("--cluster describes URLs");
        assert!(
            error.to_string().contains("--cluster needs --url"),
            "{error}"
        );
    }

    #[test]
    fn children_get_the_redisson_config_and_only_the_options_given() {
        let file = cluster_file();
        let path = file.path().to_str().expect("UTF-8 path");
        let (args, env) = forwarded(&target(&["--redisson-config", path]));
        assert_eq!(args, ["--redisson-config", path]);
        assert!(!env.iter().any(|(name, _)| name == URL_ENV), "{env:?}");
    }
}
