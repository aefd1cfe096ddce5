//! Credentials that change while a client runs (cloud IAM tokens, rotated passwords): a provider
//! asked for them whenever a connection is opened.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;

use redis::{ErrorKind, RedisError, RedisResult};

/// The user name and password one new connection authenticates with (`AUTH`/`HELLO`).
#[derive(Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Credentials {
    /// The ACL user; `None` for the `default` user.
    pub username: Option<String>,
    /// The password or token.
    pub password: String,
}

impl Credentials {
    /// `password` for the ACL user `username`.
    pub fn new(username: impl Into<String>, password: impl Into<String>) -> Self {
        Self {
            username: Some(username.into()),
            password: password.into(),
        }
    }

    /// `password` for the `default` user (`requirepass`).
    pub fn password(password: impl Into<String>) -> Self {
        Self {
            username: None,
            password: password.into(),
        }
    }
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("username", &self.username)
            .field("password", &"***")
            .finish()
    }
}

/// What a [`CredentialsProvider`] fails with: any error, reported as the failure to open the
/// connection it was asked for.
pub type ProviderError = Box<dyn std::error::Error + Send + Sync>;

type Provide =
    dyn Fn() -> BoxFuture<'static, std::result::Result<Credentials, ProviderError>> + Send + Sync;

/// Asked for [`Credentials`] every time the client opens a connection: each command connection of
/// the pool and each (re)connect of the subscriber, in every topology (for Sentinel, the master's
/// credentials; the sentinels' own stay in their URLs). Connections already open keep the
/// credentials they authenticated with, as Redis does: a rotated password or an expired token
/// matters to new connections only. Set it as [`Config::credentials_provider`]; it takes the place
/// of the credentials in the URLs.
///
/// Clones share the provider; two providers are equal only if one is a clone of the other.
///
/// # Examples
///
/// ```
/// use rlock_redisson::{Config, Credentials, CredentialsProvider};
///
/// let mut config = Config::new("redis://127.0.0.1:6379/");
/// config.credentials_provider = Some(CredentialsProvider::new(|| async {
///     // e.g. fetch a short-lived token from the cloud provider's metadata service
///     let token = std::env::var("REDIS_TOKEN").unwrap_or_default();
///     Ok(Credentials::new("app", token))
/// }));
/// assert_eq!(config.clone(), config);
/// ```
///
/// [`Config::credentials_provider`]: crate::Config::credentials_provider
#[derive(Clone)]
pub struct CredentialsProvider(Arc<Provide>);

impl CredentialsProvider {
    /// A provider that runs `provide` for each new connection.
    pub fn new<F, Fut>(provide: F) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<Credentials, ProviderError>> + Send + 'static,
    {
        Self(Arc::new(move || Box::pin(provide())))
    }

    /// The credentials for a connection about to be opened; the provider's error becomes the
    /// connection's (an authentication failure).
    ///
    /// # Cancel safety
    ///
    /// As cancel safe as the provider's future.
    pub(crate) async fn credentials(&self) -> RedisResult<Credentials> {
        (self.0)().await.map_err(|e| {
            RedisError::from((
                ErrorKind::AuthenticationFailed,
                "the credentials provider failed",
                e.to_string(),
            ))
        })
    }
}

impl PartialEq for CredentialsProvider {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for CredentialsProvider {}

impl fmt::Debug for CredentialsProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("CredentialsProvider(..)")
    }
}
