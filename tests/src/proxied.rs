//! Every topology rlock supports, with a [`FaultProxy`] between rlock and each Redis node it talks
//! to, so a test can lose, delay or cut the replies of exactly the request it is about.
//!
//! - [`Deployment::Single`]: one server behind one proxy.
//! - [`Deployment::MasterReplica`]: a master behind a proxy (rlock waits for its replica with `WAIT`).
//! - [`Deployment::Sentinel`]: sentinels that watch the master's proxy, so the master address they
//!   give rlock is the proxy's (the replica replicates through it too).
//! - [`Deployment::Cluster`]: three masters, each behind its proxy; the nodes announce their own
//!   addresses, and rlock maps them to the proxies with [`rlock_redisson::Config::nat_map`], so redirects go
//!   through the proxies as well.
//!
//! Inspection goes around the proxies: [`Proxied::master_of`] is the real server.

use std::time::Duration;

use crate::RedisServer;
use crate::proxy::FaultProxy;
use crate::topology::{Cluster, SentinelSetup};

/// The topologies, by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Deployment {
    /// One server.
    Single,
    /// A master and one replica, writes followed by `WAIT`.
    MasterReplica,
    /// A master, one replica and one sentinel.
    Sentinel,
    /// Three masters.
    Cluster,
}

/// The servers of a deployment, kept alive with it.
#[derive(Debug)]
enum Servers {
    Single(RedisServer),
    MasterReplica {
        master: RedisServer,
        _replica: RedisServer,
    },
    Sentinel(SentinelSetup),
    Cluster(Cluster),
}

/// A running deployment with a proxy in front of every node rlock talks to.
#[derive(Debug)]
pub struct Proxied {
    /// Which topology this is.
    pub deployment: Deployment,
    servers: Servers,
    /// One per master, with the port of the server it fronts.
    proxies: Vec<(u16, FaultProxy)>,
}

impl Proxied {
    /// Starts `deployment` and returns once it is ready (replicas in sync, cluster state ok).
    pub fn start(deployment: Deployment) -> Self {
        let front = |server: &RedisServer| (server.port(), FaultProxy::start(server.port()));
        let (servers, proxies) = match deployment {
            Deployment::Single => {
                let server = RedisServer::start();
                let proxy = front(&server);
                (Servers::Single(server), vec![proxy])
            }
            Deployment::MasterReplica => {
                let master = RedisServer::start();
                let replica = RedisServer::start_with(&[
                    "--replicaof",
                    "127.0.0.1",
                    &master.port().to_string(),
                ]);
                wait_for_replica(&master);
                let proxy = front(&master);
                let servers = Servers::MasterReplica {
                    master,
                    _replica: replica,
                };
                (servers, vec![proxy])
            }
            Deployment::Sentinel => {
                let mut proxy = None;
                let setup = SentinelSetup::start_watching(1, 1, |master| {
                    let (port, fronting) = front(master);
                    let watched = fronting.port();
                    proxy = Some((port, fronting));
                    watched
                });
                let proxy = proxy.expect("the sentinels watch a proxy");
                (Servers::Sentinel(setup), vec![proxy])
            }
            Deployment::Cluster => {
                let cluster = Cluster::start(3, 0);
                let proxies = cluster.masters().iter().map(front).collect();
                (Servers::Cluster(cluster), proxies)
            }
        };
        Self {
            deployment,
            servers,
            proxies,
        }
    }

    /// An rlock configuration that reaches every node through its proxy.
    pub fn config(&self) -> rlock_redisson::Config {
        let proxy = &self.proxies[0].1;
        match &self.servers {
            Servers::Single(_) => rlock_redisson::Config::new(proxy.url()),
            Servers::MasterReplica { .. } => rlock_redisson::Config::master_replica(proxy.url()),
            Servers::Sentinel(setup) => setup.config(),
            Servers::Cluster(_) => {
                let mut config = rlock_redisson::Config::cluster(
                    self.proxies.iter().map(|(_, proxy)| proxy.url()),
                );
                config.nat_map = self
                    .proxies
                    .iter()
                    .map(|(port, proxy)| {
                        (
                            format!("127.0.0.1:{port}"),
                            format!("127.0.0.1:{}", proxy.port()),
                        )
                    })
                    .collect();
                config
            }
        }
    }

    /// The (real) master that holds `key`.
    pub fn master_of(&self, key: &str) -> &RedisServer {
        match &self.servers {
            Servers::Single(server) => server,
            Servers::MasterReplica { master, .. } => master,
            Servers::Sentinel(setup) => &setup.master,
            Servers::Cluster(cluster) => cluster.master_of(key),
        }
    }

    /// The proxy in front of the master that holds `key`.
    pub fn proxy_of(&self, key: &str) -> &FaultProxy {
        let port = self.master_of(key).port();
        self.proxies
            .iter()
            .find_map(|(fronted, proxy)| (*fronted == port).then_some(proxy))
            .expect("every master has its proxy")
    }

    /// The cluster, in [`Deployment::Cluster`].
    pub fn cluster(&self) -> Option<&Cluster> {
        match &self.servers {
            Servers::Cluster(cluster) => Some(cluster),
            _ => None,
        }
    }

    /// Every proxy.
    pub fn proxies(&self) -> impl Iterator<Item = &FaultProxy> {
        self.proxies.iter().map(|(_, proxy)| proxy)
    }
}

/// Waits until `master` has an online replica.
fn wait_for_replica(master: &RedisServer) {
    let until = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query(&mut crate::topology::connect(master))
            .unwrap_or_default();
        if info.contains("connected_slaves:1") && info.contains("state=online") {
            return;
        }
        assert!(
            std::time::Instant::now() < until,
            "the replica of {} did not come online",
            master.port()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
