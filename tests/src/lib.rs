//! Test support for `rlock`.
//!
//! This crate is not published. It hosts the workspace's integration tests
//! (`tests/tests/*.rs`) and the helpers they share, most importantly
//! [`RedisServer`]: a private `redis-server` child process on a free loopback
//! port, so every test gets its own isolated server and nothing has to be
//! started by hand before `cargo test`. The benchmark runner (`benches/`)
//! starts its private server with it too. [`proxy::FaultProxy`] sits between
//! a client and a server to lose, delay or drop replies on demand.
//!
//! ```no_run
//! use rlock_tests::RedisServer;
//!
//! let server = RedisServer::start();
//! let client = server.client();
//! // ... exercise rlock against `server.url()` ...
//! drop(server); // kills the child and removes its data directory
//! # drop(client);
//! ```

pub mod harness;
pub mod history;
pub mod kinds;
pub mod logs;
pub mod proxied;
pub mod proxy;
pub mod recorder;
pub mod redisson;
pub mod server;
pub mod topology;

pub use server::RedisServer;
