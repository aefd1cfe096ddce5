//! redis-rs clients for the configured servers, with the configuration's TLS trust, NAT map and
//! credentials: the command pool opens its connections with them, and so does the subscriber
//! (`pubsub`), so that both reach the same servers the same way.

#[cfg(feature = "sentinel")]
use redis::RedisError;
use redis::RedisResult;

use crate::config::Config;
#[cfg(feature = "sentinel")]
use crate::config::Topology;
use crate::credentials::CredentialsProvider;

/// A configuration whose credentials are asked for anew for each connection
/// ([`Config::credentials_provider`]).
pub(crate) struct Rotating {
    provider: CredentialsProvider,
    config: Config,
}

impl Rotating {
    /// `config`'s, when it has a credentials provider.
    pub(crate) fn of(config: &Config) -> Option<Self> {
        let provider = config.credentials_provider.clone()?;
        Some(Self {
            provider,
            config: config.clone(),
        })
    }

    /// The configuration with the provider's current credentials.
    pub(crate) async fn config(&self) -> RedisResult<Config> {
        let credentials = self.provider.credentials().await?;
        self.config.with_credentials(&credentials)
    }
}

/// A client for the server at `url`, trusting [`Config::tls_root_cert`] for `rediss://`.
pub(crate) fn node_client(config: &Config, url: &str) -> RedisResult<redis::Client> {
    match &config.tls_root_cert {
        #[cfg(feature = "tls")]
        Some(root) => redis::Client::build_with_tls(url, trusting(root)),
        // Without the `tls` feature, `Deployment::of` refused a root certificate.
        _ => redis::Client::open(url),
    }
}

/// TLS settings that trust the CA certificate `root` (PEM), without a client certificate.
#[cfg(feature = "tls")]
fn trusting(root: &[u8]) -> redis::TlsCertificates {
    redis::TlsCertificates {
        client_tls: None,
        root_cert: Some(root.to_vec()),
    }
}

/// A cluster client builder for the configured seeds, trusting [`Config::tls_root_cert`].
#[cfg(feature = "cluster")]
pub(crate) fn cluster_builder(config: &Config) -> redis::cluster::ClusterClientBuilder {
    let mut builder = redis::cluster::ClusterClientBuilder::new(config.addresses())
        .connection_timeout(config.connect_timeout);
    if !config.nat_map.is_empty() {
        builder = builder.node_address_map(
            config
                .nat_map
                .iter()
                .filter_map(|(announced, reachable)| {
                    Some((node_address(announced)?, node_address(reachable)?))
                })
                .collect(),
        );
    }
    match &config.tls_root_cert {
        #[cfg(feature = "tls")]
        Some(root) => builder.certs(trusting(root)),
        _ => builder,
    }
}

/// `host:port` as a cluster node address ([`Config::validate`] checked the form).
#[cfg(feature = "cluster")]
fn node_address(address: &str) -> Option<redis::cluster::NodeAddress> {
    let (host, port) = address.rsplit_once(':')?;
    Some(redis::cluster::NodeAddress::new(
        host.to_owned(),
        port.parse().ok()?,
    ))
}

/// A Sentinel client for the configured master: the sentinels are the configured addresses; the
/// master is reached with the topology's credentials and the database and TLS mode of `url`.
#[cfg(feature = "sentinel")]
pub(crate) fn sentinel_client(config: &Config) -> RedisResult<redis::sentinel::SentinelClient> {
    use redis::IntoConnectionInfo as _;
    let Topology::Sentinel {
        master_name,
        username,
        password,
    } = &config.topology
    else {
        return Err(RedisError::from((
            redis::ErrorKind::Client,
            "not a sentinel topology",
        )));
    };
    let template = config.url.as_str().into_connection_info()?;
    let mut settings = template.redis_settings().clone();
    if let Some(username) = username {
        settings = settings.set_username(username);
    }
    if let Some(password) = password {
        settings = settings.set_password(password);
    }
    let mut master =
        redis::sentinel::SentinelNodeConnectionInfo::default().set_redis_connection_info(settings);
    if let redis::ConnectionAddr::TcpTls { insecure, .. } = template.addr() {
        master = master.set_tls_mode(if *insecure {
            redis::TlsMode::Insecure
        } else {
            redis::TlsMode::Secure
        });
    }
    redis::sentinel::SentinelClient::build(
        config.addresses(),
        // A `String`: redis-rs takes `impl AsRef<str>` with TLS and `String` without.
        master_name.clone(),
        Some(master),
        redis::sentinel::SentinelServerType::Master,
    )
}
