//! Every topology rlock supports, with a [`FaultProxy`] between rlock and each Redis node it talks
//! to, so a test can lose, delay or cut the replies of exactly the request it is about.
//!
//! - [`Deployment::Single`]: one server behind one proxy.
//! - [`Deployment::MasterReplica`]: a master behind a proxy (rlock waits for its replica with `WAIT`).
//! - [`Deployment::Sentinel`]: sentinels that watch the master's proxy, so the master address they
//!   give rlock is the proxy's (the replica replicates through it too); the replica is behind its
//!   own proxy and announces it, so after a failover rlock reaches the promoted replica through it.
//! - [`Deployment::Cluster`]: three masters, each behind its proxy; the nodes announce their own
//!   addresses, and rlock maps them to the proxies with [`rlock_redisson::Config::nat_map`], so redirects go
//!   through the proxies as well.
//! - [`Deployment::ReplicatedCluster`]: the same with a replica per master, every node behind its
//!   proxy: for failovers.
//!
//! Inspection goes around the proxies: [`Proxied::master_of`] is the real server, and follows a
//! [`Proxied::fail_over`].

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
    /// Three masters with a replica each.
    ReplicatedCluster,
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
    /// One per node rlock talks to, with the port of the server it fronts.
    proxies: Vec<(u16, FaultProxy)>,
    /// The port of the replica promoted by [`Proxied::fail_over`] in a Sentinel setup.
    promoted: Option<u16>,
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
                let mut proxies = Vec::new();
                let setup = SentinelSetup::start_watching(1, 1, |server| {
                    let (port, fronting) = front(server);
                    let watched = fronting.port();
                    proxies.push((port, fronting));
                    watched
                });
                (Servers::Sentinel(setup), proxies)
            }
            Deployment::Cluster | Deployment::ReplicatedCluster => {
                let replicas = usize::from(deployment == Deployment::ReplicatedCluster);
                let cluster = Cluster::start(3, replicas);
                let proxies = cluster.nodes.iter().map(front).collect();
                (Servers::Cluster(cluster), proxies)
            }
        };
        Self {
            deployment,
            servers,
            proxies,
            promoted: None,
        }
    }

    /// Kills the master of `key` (`SIGKILL`), calls `killed` the moment it is dead, and returns once
    /// a replica was promoted in its place (by the sentinels, or by the cluster's own failover) and
    /// accepts writes. From then on [`Proxied::master_of`] and [`Proxied::proxy_of`] are the
    /// promoted replica's.
    ///
    /// # Panics
    ///
    /// In a deployment without replicas to promote.
    pub fn fail_over(&mut self, key: &str, killed: impl FnOnce()) -> &RedisServer {
        match &mut self.servers {
            Servers::Sentinel(setup) => {
                setup.master.kill();
                killed();
                self.promoted = Some(setup.await_promotion());
            }
            Servers::Cluster(cluster) if self.deployment == Deployment::ReplicatedCluster => {
                let _ = cluster.fail_over_master_of(key, killed);
            }
            _ => panic!("{:?} has no replica to promote", self.deployment),
        }
        self.master_of(key)
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
            Servers::Sentinel(setup) => match self.promoted {
                Some(port) => setup
                    .replicas
                    .iter()
                    .find(|replica| replica.port() == port)
                    .expect("the promoted replica is one of the setup's"),
                None => &setup.master,
            },
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
            .query(&mut crate::harness::raw_blocking(master))
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
