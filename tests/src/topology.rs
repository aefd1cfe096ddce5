//! Local Redis topologies for tests and for `scripts/topology.sh`: a Redis Cluster and a Sentinel
//! setup, built from private [`RedisServer`]s on loopback ports.
//!
//! The cluster is wired by hand with `CLUSTER MEET`, `CLUSTER ADDSLOTSRANGE` and `CLUSTER REPLICATE`
//! (no `redis-cli` needed); the sentinel setup is a master, its replicas (`REPLICAOF`) and sentinels
//! that monitor it with short timeouts so a failover takes seconds.
//!
//! Everything here panics with a descriptive message on failure: it is test support.

use std::thread;
use std::time::{Duration, Instant};

use redis::ConnectionLike;

use crate::RedisServer;
use crate::harness::raw_blocking;

/// How long a topology may take to converge.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(30);
/// Redis Cluster's slot count.
const SLOTS: u16 = 16384;

/// Polls `check` every 50 ms until it holds, panicking with `what` after [`SETTLE_TIMEOUT`].
fn settle(what: &str, mut check: impl FnMut() -> bool) {
    let until = Instant::now() + SETTLE_TIMEOUT;
    while !check() {
        assert!(
            Instant::now() < until,
            "{what} did not happen within {SETTLE_TIMEOUT:?}"
        );
        thread::sleep(Duration::from_millis(50));
    }
}

/// A Redis Cluster of `masters` masters, each with `replicas` replicas.
#[derive(Debug)]
pub struct Cluster {
    /// The masters first, then the replicas.
    pub nodes: Vec<RedisServer>,
    masters: usize,
}

impl Cluster {
    /// Starts and wires the cluster; returns once every node reports `cluster_state:ok` and every
    /// replica's link to its master is up.
    pub fn start(masters: usize, replicas: usize) -> Self {
        assert!(masters > 0, "a cluster needs a master");
        let nodes: Vec<RedisServer> = (0..masters * (1 + replicas))
            .map(|_| {
                RedisServer::start_with(&[
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-node-timeout",
                    "2000",
                ])
            })
            .collect();
        let cluster = Self { nodes, masters };
        cluster.wire(replicas);
        cluster
    }

    fn wire(&self, replicas: usize) {
        // Distinct config epochs before the nodes meet, as `redis-cli --cluster create` gives
        // them: nodes that meet with epoch 0 resolve the collisions one by one, and a slot that
        // moves (`migrate_slot_of`) while its new owner still shares the highest epoch with another
        // master is never learned by the replicas (a claim wins only with a greater epoch).
        for (epoch, node) in (1..).zip(&self.nodes) {
            let _: () = redis::cmd("CLUSTER")
                .arg("SET-CONFIG-EPOCH")
                .arg(epoch)
                .query(&mut raw_blocking(node))
                .expect("CLUSTER SET-CONFIG-EPOCH");
        }
        let first = self.nodes[0].port();
        for node in &self.nodes[1..] {
            let _: () = redis::cmd("CLUSTER")
                .arg("MEET")
                .arg("127.0.0.1")
                .arg(first)
                .query(&mut raw_blocking(node))
                .expect("CLUSTER MEET");
        }
        let per_master = SLOTS / self.masters as u16;
        for (i, master) in self.masters().iter().enumerate() {
            let start = i as u16 * per_master;
            let end = if i + 1 == self.masters {
                SLOTS - 1
            } else {
                start + per_master - 1
            };
            let _: () = redis::cmd("CLUSTER")
                .arg("ADDSLOTSRANGE")
                .arg(start)
                .arg(end)
                .query(&mut raw_blocking(master))
                .expect("CLUSTER ADDSLOTSRANGE");
        }
        let total = self.nodes.len();
        settle("every node meeting every other", || {
            self.nodes.iter().all(|node| {
                let nodes: String = redis::cmd("CLUSTER")
                    .arg("NODES")
                    .query(&mut raw_blocking(node))
                    .unwrap_or_default();
                nodes.lines().count() == total
            })
        });
        for (i, replica) in self.nodes[self.masters..].iter().enumerate() {
            let master = &self.nodes[i / replicas.max(1)];
            let id = node_id(master);
            settle("a replica accepting its master", || {
                redis::cmd("CLUSTER")
                    .arg("REPLICATE")
                    .arg(&id)
                    .query::<()>(&mut raw_blocking(replica))
                    .is_ok()
            });
        }
        settle("the cluster state turning ok", || {
            self.nodes.iter().all(|node| {
                let info: String = redis::cmd("CLUSTER")
                    .arg("INFO")
                    .query(&mut raw_blocking(node))
                    .unwrap_or_default();
                info.contains("cluster_state:ok")
            })
        });
        settle("every replica syncing", || {
            self.nodes[self.masters..].iter().all(|replica| {
                let info: String = redis::cmd("INFO")
                    .arg("replication")
                    .query(&mut raw_blocking(replica))
                    .unwrap_or_default();
                info.contains("master_link_status:up")
            })
        });
    }

    /// The masters.
    pub fn masters(&self) -> &[RedisServer] {
        &self.nodes[..self.masters]
    }

    /// The seed URLs of every node.
    pub fn seeds(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }

    /// An rlock configuration for this cluster.
    pub fn config(&self) -> rlock_redisson::Config {
        rlock_redisson::Config::cluster(self.seeds())
    }

    /// The master that owns `key`'s slot: one of the masters at start, or a replica promoted in
    /// place of a master that was killed.
    pub fn master_of(&self, key: &str) -> &RedisServer {
        self.owner_of(key_slot(self.live_node(), key))
            .expect("some master owns every slot")
    }

    /// The running node that owns `slot`, as it sees itself.
    fn owner_of(&self, slot: u16) -> Option<&RedisServer> {
        self.live_nodes().find(|node| owns_slot(node, slot))
    }

    /// The nodes that run (not killed).
    fn live_nodes(&self) -> impl Iterator<Item = &RedisServer> {
        self.nodes.iter().filter(|node| node.is_running())
    }

    /// A node that runs, to ask about the cluster.
    fn live_node(&self) -> &RedisServer {
        self.live_nodes()
            .next()
            .expect("a node of the cluster runs")
    }

    /// Kills (`SIGKILL`) the master of `key`'s slot, calls `killed` the moment it is dead, and waits
    /// until a replica, promoted by the cluster's own failover, owns the slot as every running node
    /// sees it and their cluster state is ok again; returns that replica.
    pub fn fail_over_master_of(&mut self, key: &str, killed: impl FnOnce()) -> &RedisServer {
        let slot = key_slot(self.live_node(), key);
        let dead = self.master_of(key).port();
        self.nodes
            .iter_mut()
            .find(|node| node.port() == dead)
            .expect("the master is a node")
            .kill();
        killed();
        settle("a replica taking over the killed master's slots", || {
            let Some(owner) = self.owner_of(slot).map(RedisServer::port) else {
                return false;
            };
            self.live_nodes().all(|node| {
                let info: String = redis::cmd("CLUSTER")
                    .arg("INFO")
                    .query(&mut raw_blocking(node))
                    .unwrap_or_default();
                info.contains("cluster_state:ok") && slot_owner_port(node, slot) == Some(owner)
            })
        });
        self.master_of(key)
    }

    /// Moves `key`'s slot, with its keys, from its master to `to` (another master), the way
    /// `redis-cli --cluster reshard` does: IMPORTING/MIGRATING, MIGRATE the keys, then SETSLOT NODE
    /// everywhere.
    pub fn migrate_slot_of(&self, key: &str, to: &RedisServer) {
        let slot = key_slot(&self.nodes[0], key);
        let from = self.master_of(key);
        assert_ne!(from.port(), to.port(), "the slot is already there");
        let (from_id, to_id) = (node_id(from), node_id(to));
        let setslot = |node: &RedisServer, state: &str, id: &str| {
            let _: () = redis::cmd("CLUSTER")
                .arg("SETSLOT")
                .arg(slot)
                .arg(state)
                .arg(id)
                .query(&mut raw_blocking(node))
                .expect("CLUSTER SETSLOT");
        };
        setslot(to, "IMPORTING", &from_id);
        setslot(from, "MIGRATING", &to_id);
        let mut source = raw_blocking(from);
        loop {
            let keys: Vec<String> = redis::cmd("CLUSTER")
                .arg("GETKEYSINSLOT")
                .arg(slot)
                .arg(100)
                .query(&mut source)
                .expect("CLUSTER GETKEYSINSLOT");
            if keys.is_empty() {
                break;
            }
            let _: () = redis::cmd("MIGRATE")
                .arg("127.0.0.1")
                .arg(to.port())
                .arg("")
                .arg(0)
                .arg(5000)
                .arg("KEYS")
                .arg(&keys)
                .query(&mut source)
                .expect("MIGRATE");
        }
        for node in self.masters() {
            setslot(node, "NODE", &to_id);
        }
        settle("every node agreeing on the slot's new owner", || {
            self.nodes
                .iter()
                .all(|node| slot_owner_port(node, slot) == Some(to.port()))
        });
    }
}

/// `CLUSTER MYID` of `node`.
pub fn node_id(node: &RedisServer) -> String {
    redis::cmd("CLUSTER")
        .arg("MYID")
        .query(&mut raw_blocking(node))
        .expect("CLUSTER MYID")
}

fn key_slot(node: &RedisServer, key: &str) -> u16 {
    redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(key)
        .query(&mut raw_blocking(node))
        .expect("CLUSTER KEYSLOT")
}

fn owns_slot(master: &RedisServer, slot: u16) -> bool {
    slot_owner_port(master, slot) == Some(master.port())
}

/// The port of the master that `node` believes owns `slot`, from `CLUSTER SLOTS`
/// (`[[start, end, [ip, port, id, ...], replicas...], ...]`).
fn slot_owner_port(node: &RedisServer, slot: u16) -> Option<u16> {
    let ranges: Vec<redis::Value> = redis::cmd("CLUSTER")
        .arg("SLOTS")
        .query(&mut raw_blocking(node))
        .ok()?;
    ranges.into_iter().find_map(|range| {
        let redis::Value::Array(range) = range else {
            return None;
        };
        let start: u16 = redis::from_redis_value(range.first()?.clone()).ok()?;
        let end: u16 = redis::from_redis_value(range.get(1)?.clone()).ok()?;
        let redis::Value::Array(master) = range.get(2)? else {
            return None;
        };
        let port: u16 = redis::from_redis_value(master.get(1)?.clone()).ok()?;
        (start..=end).contains(&slot).then_some(port)
    })
}

/// A master, its replicas and the sentinels that watch it.
#[derive(Debug)]
pub struct SentinelSetup {
    /// The master at start (after a failover, ask the sentinels).
    pub master: RedisServer,
    /// Its replicas.
    pub replicas: Vec<RedisServer>,
    /// The sentinels.
    pub sentinels: Vec<RedisServer>,
    /// The port each replica announces (to its master, so to the sentinels and their clients), in
    /// the order of `replicas`.
    announced: Vec<u16>,
}

impl SentinelSetup {
    /// The master's name in the sentinels' configuration.
    pub const MASTER_NAME: &'static str = "rlockmaster";

    /// Starts a master with `replicas` replicas and `sentinels` sentinels (quorum: a majority), and
    /// returns once every sentinel sees the replicas and the other sentinels.
    pub fn start(replicas: usize, sentinels: usize) -> Self {
        Self::start_watching(replicas, sentinels, RedisServer::port)
    }

    /// [`SentinelSetup::start`], with every server reached at the port `watched` returns for it (a
    /// proxy in front of it, say): the sentinels watch the master there, and each replica announces
    /// its port (`replica-announce-port`) and replicates from the master's, so the sentinels name
    /// those addresses to clients, after a failover too.
    pub fn start_watching(
        replicas: usize,
        sentinels: usize,
        mut watched: impl FnMut(&RedisServer) -> u16,
    ) -> Self {
        let master = RedisServer::start();
        let port = watched(&master).to_string();
        let replicas: Vec<RedisServer> = (0..replicas).map(|_| RedisServer::start()).collect();
        let announced = replicas
            .iter()
            .map(|replica| {
                let announced = watched(replica);
                let mut conn = raw_blocking(replica);
                let _: () = redis::cmd("CONFIG")
                    .arg("SET")
                    .arg("replica-announce-port")
                    .arg(announced)
                    .query(&mut conn)
                    .expect("CONFIG SET replica-announce-port");
                let _: () = redis::cmd("REPLICAOF")
                    .arg("127.0.0.1")
                    .arg(&port)
                    .query(&mut conn)
                    .expect("REPLICAOF");
                announced
            })
            .collect();
        let quorum = sentinels / 2 + 1;
        let config = format!(
            "sentinel monitor {name} 127.0.0.1 {port} {quorum}\n\
             sentinel down-after-milliseconds {name} 1000\n\
             sentinel failover-timeout {name} 5000\n\
             sentinel parallel-syncs {name} 1\n",
            name = Self::MASTER_NAME,
        );
        let sentinels = (0..sentinels)
            .map(|_| RedisServer::start_sentinel(&config))
            .collect();
        let setup = Self {
            master,
            replicas,
            sentinels,
            announced,
        };
        setup.wait_until_known();
        setup
    }

    fn wait_until_known(&self) {
        let (replicas, others) = (self.replicas.len(), self.sentinels.len() - 1);
        settle("the sentinels discovering replicas and each other", || {
            self.sentinels.iter().all(|sentinel| {
                let master: Vec<String> = redis::cmd("SENTINEL")
                    .arg("MASTER")
                    .arg(Self::MASTER_NAME)
                    .query(&mut raw_blocking(sentinel))
                    .unwrap_or_default();
                let field = |name: &str| {
                    master
                        .iter()
                        .position(|f| f == name)
                        .and_then(|i| master.get(i + 1))
                        .and_then(|v| v.parse::<usize>().ok())
                };
                field("num-slaves") == Some(replicas)
                    && field("num-other-sentinels") == Some(others)
            })
        });
        settle("every replica syncing", || {
            self.replicas.iter().all(|replica| {
                let info: String = redis::cmd("INFO")
                    .arg("replication")
                    .query(&mut raw_blocking(replica))
                    .unwrap_or_default();
                info.contains("master_link_status:up")
            })
        });
    }

    /// The sentinels' URLs.
    pub fn sentinel_urls(&self) -> Vec<String> {
        self.sentinels.iter().map(RedisServer::url).collect()
    }

    /// An rlock configuration that finds the master through the sentinels.
    pub fn config(&self) -> rlock_redisson::Config {
        rlock_redisson::Config::sentinel(Self::MASTER_NAME, self.sentinel_urls())
    }

    /// The port of the master the first reachable sentinel names now.
    pub fn current_master_port(&self) -> Option<u16> {
        self.sentinels.iter().find_map(|sentinel| {
            let mut conn = sentinel
                .client()
                .get_connection_with_timeout(Duration::from_secs(1))
                .ok()?;
            let (_, port): (String, u16) = redis::cmd("SENTINEL")
                .arg("GET-MASTER-ADDR-BY-NAME")
                .arg(Self::MASTER_NAME)
                .query(&mut conn)
                .ok()?;
            Some(port)
        })
    }

    /// Kills the master and waits until the sentinels have promoted a replica that accepts writes;
    /// returns that replica's port (its own, not the one it announces).
    pub fn fail_over(&mut self) -> u16 {
        self.master.kill();
        self.await_promotion()
    }

    /// Waits until the sentinels have promoted a replica that accepts writes, in place of the
    /// master at start (killed); returns that replica's port (its own, not the one it announces).
    pub fn await_promotion(&self) -> u16 {
        let mut promoted = None;
        settle("the sentinels promoting a replica", || {
            promoted = self.current_master_port().and_then(|port| {
                let index = self.announced.iter().position(|&a| a == port)?;
                Some(&self.replicas[index])
            });
            promoted.is_some_and(|replica| {
                let mut conn = raw_blocking(replica);
                conn.is_open()
                    && redis::cmd("INFO")
                        .arg("replication")
                        .query::<String>(&mut conn)
                        .is_ok_and(|info| info.contains("role:master"))
            })
        });
        promoted.map_or(self.master.port(), RedisServer::port)
    }
}
