//! The commands rlock sends: the pool plus the deadlines every command runs under, and the lock
//! writes, whose outcome ([`Written`]) every caller sorts.
//!
//! Lock writes in replicated topologies are pipelined with `WAIT <replicas> <timeout>` on the same
//! connection to the same master (docs/protocol.md §5.2); the replica count is read from the
//! master's `INFO replication` and cached until a `WAIT` reply disagrees with it.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use deadpool::managed::{self, Object, Pool, PoolError};
use futures::FutureExt as _;
use futures::future::Either;
use parking_lot::Mutex;
use redis::cluster_routing::Slot;
use redis::{RedisError, RedisResult, Value};

use super::deployment::Deployment;
use super::failure::{outcome_unknown, retires_connection};
use super::pool::{Conn, Connection, InFlight, Manager, Queueing, UNBOUNDED_PER_CONNECTION};
use crate::config::{Config, Topology};
use crate::error::{Error, Operation, Result, Subject};
use crate::scripts::ScriptCall;

/// The pool plus the deadlines every command runs under.
#[derive(Clone, Debug)]
pub(crate) struct Commands {
    pool: Pool<Manager>,
    failures: Arc<AtomicU64>,
    /// Connected replicas of each slot's master (slot 0 outside cluster mode), while known.
    replicas: Arc<Mutex<HashMap<Slot, u32>>>,
    pub(super) sync: Option<ReplicaSync>,
    cluster: bool,
    /// Whether a command may name keys of one slot only: in a cluster, reached as one or behind a
    /// proxy (see [`super::probe::probe`]).
    pub(super) single_slot: bool,
    pub(crate) timeout: Duration,
    /// How long opening a connection may take.
    connect_timeout: Duration,
    /// The writes of wait-forever acquisitions this client lets build and send at once (see
    /// [`Commands::admission`]).
    admission: Arc<tokio::sync::Semaphore>,
}

/// How lock writes wait for replicas.
#[derive(Clone, Copy, Debug)]
pub(super) struct ReplicaSync {
    timeout: Duration,
    required: bool,
}

/// What became of a lock write: the one outcome type every caller sorts.
#[derive(Debug)]
pub(crate) enum Written {
    /// The script ran and replied; replicas acknowledged it where the topology asks for that.
    Ran(Value),
    /// The script ran on the master, but none of its `replicas` connected replicas acknowledged it.
    Unsynced {
        /// The script's reply.
        reply: Value,
        /// How many replicas were connected.
        replicas: u32,
    },
    /// Redis refused the script (e.g. `WRONGTYPE`): it changed nothing.
    Refused(RedisError),
    /// No reply: the script may or may not have run.
    Unknown(Unknown),
    /// No in-flight slot within this long (see [`Commands::run`]): nothing was sent.
    Unsent(Duration),
}

/// Why the outcome of a write is not known.
#[derive(Debug)]
pub(crate) enum Unknown {
    /// The connection broke after the request may have been sent.
    Broken(RedisError),
    /// The command deadline passed.
    TimedOut(Duration),
}

impl Unknown {
    /// The error a caller reports when it cannot reconcile the outcome itself.
    pub(crate) fn into_error(self, operation: Operation, subject: Subject<'_>) -> Error {
        match self {
            Self::Broken(source) => Error::backend(operation, subject, source),
            Self::TimedOut(after) => Error::timeout(operation, subject, after),
        }
    }
}

/// The reply of a lock write and, where replicas are waited for, how many acknowledged it.
#[derive(Debug)]
struct WriteReply {
    reply: Value,
    /// Connected replicas that did not acknowledge: `Some(n)` when none of `n > 0` did.
    unsynced: Option<u32>,
}

impl Commands {
    pub(crate) fn new(config: &Config, deployment: Deployment) -> Result<Self> {
        let failures = Arc::new(AtomicU64::new(0));
        let manager = Manager::new(config, deployment, failures.clone())?;
        let pool = Pool::builder(manager)
            .max_size(config.pool_size)
            .runtime(deadpool::Runtime::Tokio1)
            .wait_timeout(Some(config.command_timeout))
            .create_timeout(Some(config.connect_timeout))
            .build()
            .map_err(|e| Error::InvalidArgument(format!("connection pool: {e}")))?;
        Ok(Self {
            pool,
            failures,
            replicas: Arc::default(),
            sync: config.syncs_replicas().then_some(ReplicaSync {
                timeout: config.replicas_sync_timeout,
                required: config.check_lock_synced_replicas,
            }),
            cluster: config.topology == Topology::Cluster,
            single_slot: config.topology == Topology::Cluster,
            timeout: config.command_timeout,
            connect_timeout: config.connect_timeout,
            admission: Arc::new(tokio::sync::Semaphore::new(
                config.pool_size.saturating_mul(UNBOUNDED_PER_CONNECTION),
            )),
        })
    }

    /// What admits the writes of requests queueing as `queueing` says: nothing for
    /// [`Queueing::Bounded`]; for [`Queueing::Unbounded`] (the attempts of wait-forever
    /// acquisitions), this client's admission, as many at once as its connections carry of them
    /// (first come, first served).
    ///
    /// A write's state (its checkout, undo, script call and reply futures: over a kilobyte) is
    /// built only once admitted (`engine::admission`), so that a burst of any number of
    /// such waiters queues as small registrations, and its memory peak is the in-flight window's
    /// rather than one write per waiter (issue 38). Admitted writes still take their turn on
    /// their connection ([`Commands::run`]), almost always at once.
    pub(crate) fn admission(&self, queueing: Queueing) -> Option<&tokio::sync::Semaphore> {
        match queueing {
            Queueing::Bounded => None,
            Queueing::Unbounded => Some(&self.admission),
        }
    }

    /// The slot that a command naming several keys, `key` among them, must keep to: `None` where
    /// keys of any slots may share a command.
    pub(crate) fn batch_slot(&self, key: &str) -> Option<Slot> {
        self.single_slot.then(|| Slot::for_key(key))
    }

    /// The slot `key` belongs to: its cluster slot, or one slot for a whole single server.
    pub(crate) fn slot_of(&self, key: &str) -> Slot {
        if self.cluster {
            Slot::for_key(key)
        } else {
            SINGLE_NODE
        }
    }

    /// Checks a connection out of the pool.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: nothing has been sent yet.
    pub(crate) async fn get(
        &self,
        operation: Operation,
        subject: Subject<'_>,
    ) -> Result<Connection> {
        let pooled: Object<Manager> = self.pool.get().await.map_err(|e| match e {
            // Opening a connection took too long (a server that accepts but does not answer).
            PoolError::Timeout(managed::TimeoutType::Create) => {
                Error::timeout(Operation::Connect, subject, self.connect_timeout)
            }
            PoolError::Timeout(_) => Error::timeout(operation, subject, self.timeout),
            PoolError::Backend(source) => {
                self.connection_failed();
                if source.is_timeout() {
                    Error::timeout(Operation::Connect, subject, self.connect_timeout)
                } else {
                    Error::backend(Operation::Connect, subject, source)
                }
            }
            PoolError::Closed | PoolError::NoRuntimeSpecified => Error::Closed,
            PoolError::PostCreateHook(e) => Error::InvalidArgument(e.to_string()),
        })?;
        Ok(Connection {
            conn: pooled.conn.clone(),
            generation: pooled.generation,
            in_flight: pooled.in_flight.clone(),
            queueing: Queueing::Bounded,
            sent: false,
        })
    }

    /// `conn` (checked out earlier) for another request, queueing as a fresh checkout does, unless
    /// the pool would retire it now: a connection failed since it was opened, or a request on it
    /// missed its deadline.
    pub(crate) fn still_fresh(&self, conn: Connection) -> Option<Connection> {
        let fresh = conn.generation >= self.failures.load(Ordering::Acquire)
            && !conn.in_flight.late.load(Ordering::Acquire);
        fresh.then(|| conn.queueing(Queueing::Bounded))
    }

    /// Awaits `request` (a command on `conn`) once it holds one of the connection's in-flight
    /// slots, under the command timeout (plus the replica wait when the request includes one) from
    /// then on: the deadline measures the server and the network, not the queue of requests before
    /// it. The queue is waited out fairly (first come, first served) and unsent: for at most the
    /// command timeout, or as long as it takes where `conn` queues [`Queueing::Unbounded`];
    /// dropping this future there sends nothing. A missed deadline retires that connection, a
    /// broken one every connection opened before it.
    ///
    /// Combinators rather than an `async fn`, which would keep `request` twice (as its argument
    /// and inside the timeout it awaits): every lock and unlock goes through here.
    fn run<'a, T: 'a>(
        &'a self,
        lane: Lane<'a>,
        request: impl Future<Output = RedisResult<T>> + 'a,
    ) -> impl Future<Output = Result<RedisResult<T>, Missed>> + 'a {
        let deadline = self.timeout + self.sync.map_or(Duration::ZERO, |s| s.timeout);
        let Lane {
            in_flight,
            queueing,
            sent,
        } = lane;
        *sent = false;
        // The semaphores are never closed: `None` is a bounded wait that ran out.
        let slot = match queueing {
            Queueing::Unbounded => Either::Left(in_flight.unbounded.acquire().then(|turn| {
                in_flight
                    .slots
                    .acquire()
                    .map(move |slot| Some((turn.ok(), slot.ok()?)))
            })),
            Queueing::Bounded => Either::Right(
                tokio::time::timeout(self.timeout, in_flight.slots.acquire())
                    .map(|slot| Some((None, slot.ok()?.ok()?))),
            ),
        };
        slot.then(move |slot| {
            let Some(slot) = slot else {
                return Either::Left(std::future::ready(Err(Missed::Unsent)));
            };
            *sent = true;
            Either::Right(tokio::time::timeout(deadline, request).map(move |reply| {
                drop(slot);
                let Ok(reply) = reply else {
                    // Requests on a multiplexed connection are answered in order: one that is stuck
                    // (a paused server, a `WAIT` that never returns) holds up every later one on it.
                    in_flight.late.store(true, Ordering::Release);
                    return Err(Missed::Elapsed);
                };
                if let Err(e) = &reply
                    && retires_connection(e)
                {
                    self.connection_failed();
                }
                Ok(reply)
            }))
        })
    }

    /// Runs one script call on `conn` (see [`Commands::run`]), for a caller that reads its reply
    /// itself.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe once the call holds its slot ([`Connection::sent`]): the script may or may
    /// not have run.
    pub(crate) fn invoke<'a>(
        &'a self,
        conn: &'a mut Connection,
        call: &'a ScriptCall,
    ) -> impl Future<Output = Result<RedisResult<Value>, Missed>> + 'a {
        let (lane, conn) = Lane::of(conn);
        self.run(lane, call.invoke(conn))
    }

    /// Runs a lock write (a script call whose first key is the lock) on `conn` under the command
    /// deadline, followed on the same connection by `WAIT` for the master's replicas when the
    /// topology has them.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe once the write holds its slot ([`Connection::sent`]): the script may or may
    /// not have run. Callers own an undo for that.
    pub(crate) fn write<'a>(
        &'a self,
        conn: &'a mut Connection,
        call: &'a ScriptCall,
    ) -> impl Future<Output = Written> + 'a {
        let (lane, conn) = Lane::of(conn);
        self.run(lane, self.write_synced(conn, call))
            .map(|outcome| self.written(outcome))
    }

    /// Runs a write that Redisson sends without waiting for replicas (a latch's count-down,
    /// docs/protocol.md §5.1) on `conn` under the command deadline.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe once the write holds its slot: the script may or may not have run.
    pub(crate) async fn write_unsynced(&self, conn: &mut Connection, call: &ScriptCall) -> Written {
        let (lane, conn) = Lane::of(conn);
        let outcome = self
            .run(lane, async {
                let reply = call.invoke(conn).await?;
                Ok(WriteReply {
                    reply,
                    unsynced: None,
                })
            })
            .await;
        self.written(outcome)
    }

    fn written(&self, outcome: Result<RedisResult<WriteReply>, Missed>) -> Written {
        match outcome {
            Ok(Ok(WriteReply {
                reply,
                unsynced: None,
            })) => Written::Ran(reply),
            Ok(Ok(WriteReply {
                reply,
                unsynced: Some(replicas),
            })) => Written::Unsynced { reply, replicas },
            Ok(Err(e)) if outcome_unknown(&e) => Written::Unknown(Unknown::Broken(e)),
            Ok(Err(e)) => Written::Refused(e),
            Err(Missed::Unsent) => Written::Unsent(self.timeout),
            Err(Missed::Elapsed) => Written::Unknown(Unknown::TimedOut(self.timeout)),
        }
    }

    async fn write_synced(&self, conn: &mut Conn, call: &ScriptCall) -> RedisResult<WriteReply> {
        match self.sync {
            // Boxed: the replica round trips' futures are kilobytes, and every write's future (and
            // each future that awaits one) would carry them inline, and copy them as it is moved.
            Some(sync) => Box::pin(self.write_waiting_for_replicas(conn, call, sync)).await,
            None => Ok(WriteReply {
                reply: call.invoke(conn).await?,
                unsynced: None,
            }),
        }
    }

    /// [`Commands::write_synced`] where the master has replicas to wait for.
    async fn write_waiting_for_replicas(
        &self,
        conn: &mut Conn,
        call: &ScriptCall,
        sync: ReplicaSync,
    ) -> RedisResult<WriteReply> {
        let key = call.keys().first().map_or("", String::as_str);
        let slot = self.slot_of(key);
        let known = self.replicas.lock().get(&slot).copied();
        let replicas = match known {
            Some(replicas) => replicas,
            None => {
                let replicas = connected_replicas(&conn.replication_info(key).await?);
                let _ = self.replicas.lock().insert(slot, replicas);
                replicas
            }
        };
        if replicas == 0 {
            let reply = call.invoke(conn).await?;
            return Ok(WriteReply {
                reply,
                unsynced: None,
            });
        }
        let mut pipeline = redis::pipe();
        // Errors come back as values (as cluster pipelines return them anyway), so NOSCRIPT can be told
        // apart from a failed pipeline.
        let _ = pipeline
            .ignore_errors()
            .add_command(call.evalsha())
            .cmd("WAIT")
            .arg(replicas)
            .arg(sync.timeout.as_millis());
        let mut replies = conn.on_master_of(key, pipeline.clone()).await?;
        // In a pipeline, a script's error comes back as a value: NOSCRIPT means it did not run.
        if matches!(replies.first(), Some(Value::ServerError(e)) if e.kind() == Some(redis::ServerErrorKind::NoScript))
        {
            call.load(conn).await?;
            replies = conn.on_master_of(key, pipeline).await?;
        }
        let acknowledged = match replies.pop() {
            Some(Value::Int(n)) => u32::try_from(n).unwrap_or(0),
            _ => 0,
        };
        let reply = match replies.pop() {
            Some(Value::ServerError(e)) => return Err(e.into()),
            Some(reply) => reply,
            None => Value::Nil,
        };
        if acknowledged != replicas {
            // The replica set changed: read it again next time (docs/protocol.md §5.2 step 5).
            let _ = self.replicas.lock().remove(&slot);
        }
        Ok(WriteReply {
            reply,
            unsynced: (acknowledged == 0 && sync.required).then_some(replicas),
        })
    }

    /// Checks out a connection and runs one plain command: for reads and fire-and-forget writes.
    pub(crate) async fn query<T: redis::FromRedisValue>(
        &self,
        operation: Operation,
        subject: Subject<'_>,
        cmd: &redis::Cmd,
    ) -> Result<T> {
        self.query_queueing(operation, subject, cmd, Queueing::Bounded)
            .await
    }

    /// [`Commands::query`], waiting for an in-flight slot as `queueing` says.
    pub(crate) async fn query_queueing<T: redis::FromRedisValue>(
        &self,
        operation: Operation,
        subject: Subject<'_>,
        cmd: &redis::Cmd,
        queueing: Queueing,
    ) -> Result<T> {
        let mut conn = self.get(operation, subject).await?.queueing(queueing);
        let (lane, conn) = Lane::of(&mut conn);
        match self.run(lane, cmd.query_async(conn)).await {
            Ok(reply) => reply.map_err(|e| Error::from_redis(operation, subject, e)),
            // Not sent, or sent and not answered: either way the command timeout passed.
            Err(_) => Err(Error::timeout(operation, subject, self.timeout)),
        }
    }

    /// Checks out a connection and runs one read-only script call.
    pub(crate) async fn script<T: redis::FromRedisValue>(
        &self,
        operation: Operation,
        subject: Subject<'_>,
        call: &ScriptCall,
    ) -> Result<T> {
        let mut conn = self.get(operation, subject).await?;
        match self.invoke(&mut conn, call).await {
            Ok(reply) => reply
                .and_then(|value| redis::from_redis_value(value).map_err(Into::into))
                .map_err(|e| Error::from_redis(operation, subject, e)),
            // Not sent, or sent and not answered: either way the command timeout passed.
            Err(_) => Err(Error::timeout(operation, subject, self.timeout)),
        }
    }

    /// A connection to the server broke (one of the pool's, or the subscriber's): the pooled ones
    /// may be broken too, so each is replaced at its next checkout rather than written to.
    pub(crate) fn connection_failed(&self) {
        let _ = self.failures.fetch_add(1, Ordering::AcqRel);
    }
}

/// The cache slot of every key outside cluster mode, where one master owns everything.
const SINGLE_NODE: Slot = match Slot::new(0) {
    Some(slot) => slot,
    None => unreachable!(),
};

/// `connected_slaves:<n>` of an `INFO replication` reply.
fn connected_replicas(info: &str) -> u32 {
    info.lines()
        .find_map(|line| line.strip_prefix("connected_slaves:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

/// A request that got no reply within the command timeout.
#[derive(Debug)]
pub(crate) enum Missed {
    /// It got no in-flight slot in that time: it was never sent.
    Unsent,
    /// Its deadline passed before a reply arrived: the command may or may not have run.
    Elapsed,
}

/// The parts of a checked-out [`Connection`] that [`Commands::run`] keeps its books in.
struct Lane<'a> {
    in_flight: &'a InFlight,
    queueing: Queueing,
    sent: &'a mut bool,
}

impl<'a> Lane<'a> {
    /// `conn`'s lane, and the connection to send on.
    fn of(conn: &'a mut Connection) -> (Self, &'a mut Conn) {
        let Connection {
            conn,
            in_flight,
            queueing,
            sent,
            ..
        } = conn;
        let lane = Self {
            in_flight,
            queueing: *queueing,
            sent,
        };
        (lane, conn)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replica_count_comes_from_connected_slaves() {
        let info = "# Replication\r\nrole:master\r\nconnected_slaves:2\r\nslave0:ip=127.0.0.1\r\n";
        assert_eq!(connected_replicas(info), 2);
        assert_eq!(connected_replicas("role:master\r\n"), 0);
    }
}
