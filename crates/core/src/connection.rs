//! Command connections: a deadpool pool of multiplexed connections with deadlines on everything.
//!
//! deadpool-redis's own recycle step sends a `PING` on every checkout, which would add a round trip to
//! every lock operation. rlock's manager creates connections through deadpool-redis but recycles them
//! for free, and instead retires every connection opened before the last connection failure: one broken
//! connection usually means the server restarted or the network broke, so its siblings are suspect too.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use deadpool::managed::{self, Metrics, Object, Pool, PoolError, RecycleError, RecycleResult};
use redis::aio::MultiplexedConnection;
use redis::{RedisError, RedisResult};

use crate::config::Config;
use crate::error::{Error, Operation, Result};

/// A checked-out command connection. Dropping it returns it to the pool.
pub(crate) type Connection = Object<Manager>;

/// A pooled connection and the failure generation it was opened in.
#[derive(Debug)]
pub(crate) struct Pooled {
    pub(crate) conn: MultiplexedConnection,
    generation: u64,
}

#[derive(Debug)]
pub(crate) struct Manager {
    redis: deadpool_redis::Manager,
    failures: Arc<AtomicU64>,
}

impl managed::Manager for Manager {
    type Type = Pooled;
    type Error = RedisError;

    async fn create(&self) -> Result<Pooled, RedisError> {
        let generation = self.failures.load(Ordering::Acquire);
        let conn = self.redis.create().await?;
        Ok(Pooled { conn, generation })
    }

    async fn recycle(&self, pooled: &mut Pooled, _: &Metrics) -> RecycleResult<RedisError> {
        if pooled.generation < self.failures.load(Ordering::Acquire) {
            Err(RecycleError::message("opened before a connection failure"))
        } else {
            Ok(())
        }
    }
}

/// The pool plus the deadlines every command runs under.
#[derive(Clone, Debug)]
pub(crate) struct Commands {
    pool: Pool<Manager>,
    failures: Arc<AtomicU64>,
    pub(crate) timeout: Duration,
}

impl Commands {
    pub(crate) fn new(config: &Config) -> Result<Self> {
        let redis =
            deadpool_redis::Manager::new(config.url.as_str()).map_err(|source| Error::Backend {
                operation: Operation::Connect,
                source,
            })?;
        let failures = Arc::new(AtomicU64::new(0));
        let manager = Manager {
            redis,
            failures: failures.clone(),
        };
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
            timeout: config.command_timeout,
        })
    }

    /// Checks a connection out of the pool.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: nothing has been sent yet.
    pub(crate) async fn get(&self, operation: Operation, name: &str) -> Result<Connection> {
        self.pool.get().await.map_err(|e| match e {
            PoolError::Timeout(_) => Error::timeout(operation, name, self.timeout),
            PoolError::Backend(source) => {
                self.connection_failed();
                Error::Backend {
                    operation: Operation::Connect,
                    source,
                }
            }
            PoolError::Closed | PoolError::NoRuntimeSpecified => Error::Closed,
            PoolError::PostCreateHook(e) => Error::InvalidArgument(e.to_string()),
        })
    }

    /// Awaits `request` (a command on a checked-out connection) under the command timeout. Connection
    /// failures retire the pool's older connections. `Err(Elapsed)` means the deadline passed.
    pub(crate) async fn run<T>(
        &self,
        request: impl Future<Output = RedisResult<T>>,
    ) -> Result<RedisResult<T>, Elapsed> {
        let reply = tokio::time::timeout(self.timeout, request)
            .await
            .map_err(|_| Elapsed)?;
        if let Err(e) = &reply
            && is_connection_error(e)
        {
            self.connection_failed();
        }
        Ok(reply)
    }

    /// Checks out a connection and runs one plain command: for reads and fire-and-forget writes.
    pub(crate) async fn query<T: redis::FromRedisValue>(
        &self,
        operation: Operation,
        name: &str,
        cmd: &redis::Cmd,
    ) -> Result<T> {
        let mut conn = self.get(operation, name).await?;
        match self.run(cmd.query_async(&mut conn.conn)).await {
            Ok(reply) => reply.map_err(|e| Error::from_redis(operation, name, e)),
            Err(Elapsed) => Err(Error::timeout(operation, name, self.timeout)),
        }
    }

    fn connection_failed(&self) {
        let _ = self.failures.fetch_add(1, Ordering::AcqRel);
    }
}

/// The command deadline passed before a reply arrived: the command may or may not have run.
#[derive(Debug)]
pub(crate) struct Elapsed;

/// Whether `e` says the connection broke (rather than Redis refusing the command).
pub(crate) fn is_connection_error(e: &RedisError) -> bool {
    e.is_io_error()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || e.is_unrecoverable_error()
}
