//! The global options: which Redis to talk to, and how.

use std::time::Duration;

use redis::aio::MultiplexedConnection;

use crate::Result;

const GLOBAL: &str = "Global options";

/// The Redis every command talks to.
#[derive(Debug, clap::Args)]
pub(crate) struct Target {
    /// The Redis URL, e.g. redis://127.0.0.1:6379/ (`demo` starts a private server without one).
    #[arg(long, env = "REDIS_URL", global = true, hide_env_values = true, help_heading = GLOBAL)]
    url: Option<String>,
    /// The lease of locks held without one, renewed every third of it while held.
    #[arg(long, value_name = "MS", default_value_t = 30_000, global = true, help_heading = GLOBAL)]
    watchdog_ms: u64,
}

impl Target {
    /// The URL given with `--url` or `REDIS_URL`, if any.
    pub(crate) fn given_url(&self) -> Option<&str> {
        self.url.as_deref().filter(|url| !url.is_empty())
    }

    pub(crate) fn url(&self) -> Result<&str> {
        self.given_url()
            .ok_or_else(|| "no Redis URL: pass --url or set REDIS_URL".into())
    }

    pub(crate) fn watchdog_ms(&self) -> u64 {
        self.watchdog_ms
    }

    /// An rlock client of [`Target::url`].
    pub(crate) async fn client(&self) -> Result<rlock::Client> {
        let mut config = rlock::Config::new(self.url()?);
        config.watchdog_timeout = Duration::from_millis(self.watchdog_ms);
        Ok(rlock::Client::with_config(config).await?)
    }

    /// A plain Redis connection to [`Target::url`], for what the lock API does not cover.
    pub(crate) async fn redis(&self) -> Result<MultiplexedConnection> {
        raw_connection(self.url()?).await
    }
}

/// A plain Redis connection to `url`.
pub(crate) async fn raw_connection(url: &str) -> Result<MultiplexedConnection> {
    let connect = async {
        redis::Client::open(url)?
            .get_multiplexed_async_connection()
            .await
    };
    connect
        .await
        .map_err(|e| format!("cannot connect to Redis: {e}").into())
}
