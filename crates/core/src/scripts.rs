//! Script calls: every Lua file in `lua/` is embedded at build time (by its kind, with [`lua!`]).
//!
//! Scripts are [`redis::Script`]s: the SHA1 is computed once, calls go out as `EVALSHA`, and a
//! `NOSCRIPT` reply (a restarted or flushed server) loads the script and re-sends it. `NOSCRIPT` means
//! the script did not run, so that re-send can never apply a script twice.

use std::sync::LazyLock;

use redis::aio::ConnectionLike;
use redis::{RedisResult, Script, Value};

/// A script of `lua/`, embedded at build time: `static ACQUIRE: LazyLock<Script> = lua!("x.lua");`.
/// Each kind declares its own scripts next to its code. Several files are concatenated, so scripts
/// can share a prelude of Lua functions (Redis scripts cannot include each other).
macro_rules! lua {
    ($($file:literal),+) => {
        ::std::sync::LazyLock::new(|| {
            ::redis::Script::new(concat!($(include_str!(concat!("../lua/", $file))),+))
        })
    };
}
pub(crate) use lua;

/// One script invocation with owned keys and arguments, so it can be moved into a background task
/// (e.g. the undo of a cancelled acquire).
#[derive(Clone, Debug)]
pub struct ScriptCall {
    script: &'static Script,
    keys: Vec<String>,
    /// Arguments as bytes: most are decimal text, a permit id is raw bytes (PROTOCOL.md §0).
    args: Vec<Vec<u8>>,
}

impl ScriptCall {
    pub(crate) fn new(script: &'static LazyLock<Script>) -> Self {
        Self {
            script,
            keys: Vec::new(),
            args: Vec::new(),
        }
    }

    pub(crate) fn key(mut self, key: impl Into<String>) -> Self {
        self.keys.push(key.into());
        self
    }

    pub(crate) fn arg(mut self, arg: impl ToString) -> Self {
        self.args.push(arg.to_string().into_bytes());
        self
    }

    /// An argument sent as raw bytes.
    pub(crate) fn arg_bytes(mut self, arg: &[u8]) -> Self {
        self.args.push(arg.to_vec());
        self
    }

    pub(crate) fn keys(&self) -> &[String] {
        &self.keys
    }

    /// The call as a plain `EVALSHA` command, for pipelines.
    pub(crate) fn evalsha(&self) -> redis::Cmd {
        let mut cmd = redis::cmd("EVALSHA");
        let _ = cmd
            .arg(self.script.get_hash())
            .arg(self.keys.len())
            .arg(&self.keys)
            .arg(&self.args);
        cmd
    }

    /// Loads the script (after a `NOSCRIPT`).
    pub(crate) async fn load(&self, conn: &mut (impl ConnectionLike + Send)) -> RedisResult<()> {
        let _: String = self.script.prepare_invoke().load_async(conn).await?;
        Ok(())
    }

    /// Sends the call (`EVALSHA`, loading on `NOSCRIPT`) and returns the raw reply.
    pub(crate) async fn invoke(
        &self,
        conn: &mut (impl ConnectionLike + Send),
    ) -> RedisResult<Value> {
        let mut invocation = self.script.prepare_invoke();
        for key in &self.keys {
            let _ = invocation.key(key);
        }
        for arg in &self.args {
            let _ = invocation.arg(arg);
        }
        invocation.invoke_async(conn).await
    }
}
