//! Client configuration, with Redisson's defaults (PROTOCOL.md §9).

use std::fmt;
use std::time::Duration;

use crate::error::{Error, Result};

/// The longest lease or watchdog timeout rlock accepts: anything longer is almost surely a unit mistake.
pub(crate) const MAX_LEASE: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// Settings of a [`Client`](crate::Client). Start from [`Config::new`] and change what you need.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
///
/// let mut config = rlock::Config::new("redis://127.0.0.1:6379/");
/// config.watchdog_timeout = Duration::from_secs(15);
/// config.pool_size = 32;
/// assert_eq!(config.renewal_interval(), Duration::from_secs(5));
/// ```
#[derive(Clone)]
#[non_exhaustive]
pub struct Config {
    /// The Redis URL (`redis://[user:password@]host:port[/db]`). Its password is never logged.
    pub url: String,
    /// The lease of locks taken without one, renewed every third of it while held (Redisson's
    /// `lockWatchdogTimeout`). Default 30 s.
    pub watchdog_timeout: Duration,
    /// How many locks one renewal script renews at most (Redisson's `lockWatchdogBatchSize`). Default 100.
    pub watchdog_batch_size: usize,
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
}

impl Config {
    /// The defaults, for the Redis at `url`.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            watchdog_timeout: Duration::from_secs(30),
            watchdog_batch_size: 100,
            pool_size: 8,
            command_timeout: Duration::from_secs(3),
            connect_timeout: Duration::from_secs(10),
            retry_attempts: 4,
            retry_delay: Duration::from_secs(1),
            retry_max_delay: Duration::from_secs(2),
            subscription_timeout: Duration::from_millis(7500),
        }
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
        if self.watchdog_timeout < Duration::from_millis(30) || self.watchdog_timeout > MAX_LEASE {
            return Err(Error::InvalidArgument(format!(
                "watchdog_timeout must be between 30 ms and {MAX_LEASE:?}, got {:?}",
                self.watchdog_timeout
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
            .field("watchdog_timeout", &self.watchdog_timeout)
            .field("watchdog_batch_size", &self.watchdog_batch_size)
            .field("pool_size", &self.pool_size)
            .field("command_timeout", &self.command_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("retry_attempts", &self.retry_attempts)
            .field("retry_delay", &self.retry_delay)
            .field("retry_max_delay", &self.retry_max_delay)
            .field("subscription_timeout", &self.subscription_timeout)
            .finish()
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
