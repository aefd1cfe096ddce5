//! Which of the topologies this build supports a configuration needs: a topology, or TLS, that the
//! build was compiled without (the `cluster`, `sentinel` and `tls` features) is refused here, before
//! anything connects. The command pool and the subscriber both open their connections by it.

use crate::config::{Config, Topology};
use crate::error::{Error, Result};

/// How a [`Config`] reaches Redis, among the topologies this build supports.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Deployment {
    /// The single server or the master at [`Config::url`].
    Node,
    /// A Redis Cluster.
    #[cfg(feature = "cluster")]
    Cluster,
    /// The master Sentinel names.
    #[cfg(feature = "sentinel")]
    Sentinel,
}

impl Deployment {
    /// How `config` reaches Redis. Fails with [`Error::FeatureDisabled`] when it needs what this build
    /// was compiled without: its topology's feature, or `tls` for `rediss://` URLs and
    /// [`Config::tls_root_cert`].
    pub(crate) fn of(config: &Config) -> Result<Self> {
        let disabled = |feature, needed_by| Err(Error::FeatureDisabled { feature, needed_by });
        if !cfg!(feature = "tls") {
            if config.tls_root_cert.is_some() {
                return disabled("tls", "Config::tls_root_cert");
            }
            if config.addresses().iter().any(|url| is_tls_url(url)) {
                return disabled("tls", "a rediss:// URL");
            }
        }
        match config.topology {
            Topology::Single | Topology::MasterReplica => Ok(Self::Node),
            #[cfg(feature = "cluster")]
            Topology::Cluster => Ok(Self::Cluster),
            #[cfg(not(feature = "cluster"))]
            Topology::Cluster => disabled("cluster", "Topology::Cluster"),
            #[cfg(feature = "sentinel")]
            Topology::Sentinel { .. } => Ok(Self::Sentinel),
            #[cfg(not(feature = "sentinel"))]
            Topology::Sentinel { .. } => disabled("sentinel", "Topology::Sentinel"),
        }
    }
}

/// Whether `url` asks for TLS (`rediss://`, or redis-rs's `valkeys://` alias).
fn is_tls_url(url: &str) -> bool {
    url.split_once("://").is_some_and(|(scheme, _)| {
        scheme.eq_ignore_ascii_case("rediss") || scheme.eq_ignore_ascii_case("valkeys")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The feature `config` needs and this build lacks, if any.
    fn missing_feature(config: &Config) -> Option<&'static str> {
        match Deployment::of(config) {
            Ok(_) => None,
            Err(Error::FeatureDisabled { feature, .. }) => Some(feature),
            Err(other) => panic!("unexpected error: {other}"),
        }
    }

    #[test]
    fn topologies_and_tls_need_their_features() {
        let lacking = |feature: &'static str, enabled: bool| (!enabled).then_some(feature);
        assert_eq!(
            missing_feature(&Config::new("redis://127.0.0.1:6379/")),
            None
        );
        assert_eq!(
            missing_feature(&Config::master_replica("redis://127.0.0.1:6379/")),
            None
        );
        assert_eq!(
            missing_feature(&Config::cluster(["redis://127.0.0.1:7000/"])),
            lacking("cluster", cfg!(feature = "cluster"))
        );
        assert_eq!(
            missing_feature(&Config::sentinel("m", ["redis://127.0.0.1:26379/"])),
            lacking("sentinel", cfg!(feature = "sentinel"))
        );
        let tls = lacking("tls", cfg!(feature = "tls"));
        assert_eq!(
            missing_feature(&Config::new("rediss://127.0.0.1:6380/")),
            tls
        );
        assert_eq!(
            missing_feature(&Config::new("REDISS://127.0.0.1:6380/")),
            tls
        );
        let mut tls_node = Config::master_replica("redis://127.0.0.1:6379/");
        tls_node.nodes.push("valkeys://127.0.0.1:6380/".into());
        assert_eq!(missing_feature(&tls_node), tls);
        let mut trusting = Config::new("redis://127.0.0.1:6379/");
        trusting.tls_root_cert = Some(b"-----BEGIN CERTIFICATE-----".to_vec());
        assert_eq!(missing_feature(&trusting), tls);
    }

    #[cfg(not(feature = "cluster"))]
    #[tokio::test]
    async fn a_client_without_the_cluster_feature_refuses_a_cluster_before_connecting() {
        // Nothing listens on port 1: an attempt to connect would fail with a backend error instead.
        let refused = crate::Client::with_config(Config::cluster(["redis://127.0.0.1:1/"])).await;
        assert!(
            matches!(
                &refused,
                Err(Error::FeatureDisabled {
                    feature: "cluster",
                    needed_by: "Topology::Cluster"
                })
            ),
            "{refused:?}"
        );
    }
}
