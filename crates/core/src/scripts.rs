//! Script calls: every Lua file in `lua/` is embedded at build time (by its kind, with [`lua!`]).
//!
//! Scripts are [`redis::Script`]s: the SHA1 is computed once, calls go out as `EVALSHA`, and a
//! `NOSCRIPT` reply (a restarted or flushed server) loads the script and re-sends it. `NOSCRIPT` means
//! the script did not run, so that re-send can never apply a script twice.

use std::sync::LazyLock;

use redis::aio::ConnectionLike;
use redis::{ErrorKind, RedisResult, Script, ServerErrorKind, Value};

/// A script of `lua/`, embedded at build time: `static ACQUIRE: LazyLock<Script> = lua!("x.lua");`.
/// Each kind declares its own scripts next to its code. Several files are concatenated, so scripts
/// can share a prelude of Lua functions (Redis scripts cannot include each other). The path is the
/// crate's, not the invoking file's: kinds live in folders of their own.
macro_rules! lua {
    ($($file:literal),+) => {
        ::std::sync::LazyLock::new(|| {
            ::redis::Script::new(concat!($(include_str!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/lua/",
                $file
            ))),+))
        })
    };
}
pub(crate) use lua;

/// One script invocation with owned keys and arguments, so it can be moved into a background task
/// (e.g. the undo of a cancelled acquire).
///
/// Arguments are written one after the other into a single buffer: a call is built for every lock
/// and unlock, and one allocation per argument (then another per argument for the command) was a
/// measurable part of an uncontended cycle.
#[derive(Clone, Debug)]
pub struct ScriptCall {
    script: &'static Script,
    keys: Vec<String>,
    /// The arguments' bytes, back to back: most are decimal text, a permit id is raw bytes
    /// (docs/protocol.md §0).
    args: Vec<u8>,
    /// Where each argument ends in `args`.
    arg_ends: Vec<usize>,
}

/// A script argument's text. Numbers are written with `itoa` rather than through `Display`: every
/// lock and unlock writes a few, and the formatting machinery was a measurable part of a cycle.
pub(crate) trait Arg {
    /// Appends the argument's text to `out`.
    fn write_to(&self, out: &mut Vec<u8>);
}

impl Arg for str {
    fn write_to(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self.as_bytes());
    }
}

impl Arg for String {
    fn write_to(&self, out: &mut Vec<u8>) {
        self.as_str().write_to(out);
    }
}

impl<T: Arg + ?Sized> Arg for &T {
    fn write_to(&self, out: &mut Vec<u8>) {
        (**self).write_to(out);
    }
}

macro_rules! decimal_args {
    ($($integer:ty),+) => {$(
        impl Arg for $integer {
            fn write_to(&self, out: &mut Vec<u8>) {
                out.extend_from_slice(itoa::Buffer::new().format(*self).as_bytes());
            }
        }
    )+};
}
decimal_args!(u8, u32, u64, u128, usize, i32, i64);

impl ScriptCall {
    pub(crate) fn new(script: &'static LazyLock<Script>) -> Self {
        // Room for a typical call (a few keys; a lease, a field, a channel mode), so that building
        // one does not grow its buffers.
        Self {
            script,
            keys: Vec::with_capacity(3),
            args: Vec::with_capacity(96),
            arg_ends: Vec::with_capacity(6),
        }
    }

    pub(crate) fn key(mut self, key: impl Into<String>) -> Self {
        self.keys.push(key.into());
        self
    }

    /// An argument sent as text: a string as it is, a number in decimal.
    pub(crate) fn arg(mut self, arg: impl Arg) -> Self {
        arg.write_to(&mut self.args);
        self.arg_ends.push(self.args.len());
        self
    }

    /// An argument sent as raw bytes.
    pub(crate) fn arg_bytes(mut self, arg: &[u8]) -> Self {
        self.args.extend_from_slice(arg);
        self.arg_ends.push(self.args.len());
        self
    }

    pub(crate) fn keys(&self) -> &[String] {
        &self.keys
    }

    /// The arguments, in order.
    fn args(&self) -> impl Iterator<Item = &[u8]> {
        let starts = std::iter::once(0).chain(self.arg_ends.iter().copied());
        starts
            .zip(&self.arg_ends)
            .map(|(start, &end)| &self.args[start..end])
    }

    /// The call as a plain `EVALSHA` command, for pipelines.
    pub(crate) fn evalsha(&self) -> redis::Cmd {
        let hash = self.script.get_hash();
        let count = 3 + self.keys.len() + self.arg_ends.len();
        let bytes = 32 + hash.len() + self.keys.iter().map(String::len).sum::<usize>();
        let mut cmd = redis::Cmd::with_capacity(count, bytes + self.args.len());
        let _ = cmd.arg("EVALSHA").arg(hash).arg(self.keys.len());
        for key in &self.keys {
            let _ = cmd.arg(key);
        }
        for arg in self.args() {
            let _ = cmd.arg(arg);
        }
        cmd
    }

    /// Loads the script (after a `NOSCRIPT`).
    pub(crate) async fn load(&self, conn: &mut (impl ConnectionLike + Send)) -> RedisResult<()> {
        let _: String = self.script.prepare_invoke().load_async(conn).await?;
        Ok(())
    }

    /// Sends the call (`EVALSHA`, loading and re-sending it on `NOSCRIPT`) and returns the raw reply.
    pub(crate) async fn invoke(
        &self,
        conn: &mut (impl ConnectionLike + Send),
    ) -> RedisResult<Value> {
        let cmd = self.evalsha();
        match cmd.query_async(conn).await {
            // Boxed: a flushed or restarted server is rare, and every call's future (and each one
            // that awaits it) would carry the load's state inline.
            Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                Box::pin(async {
                    self.load(conn).await?;
                    cmd.query_async(conn).await
                })
                .await
            }
            reply => reply,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static ACQUIRE: LazyLock<Script> = lua!("lock_acquire.lua");

    #[test]
    fn evalsha_sends_keys_then_arguments_in_order() {
        let call = ScriptCall::new(&ACQUIRE)
            .key("k1")
            .key(String::from("k2"))
            .arg(30_000_u64)
            .arg("")
            .arg_bytes(&[0xff, 0x00])
            .arg(-1);
        let mut expected = redis::cmd("EVALSHA");
        let _ = expected
            .arg(ACQUIRE.get_hash())
            .arg(2)
            .arg("k1")
            .arg("k2")
            .arg("30000")
            .arg("")
            .arg(&[0xff_u8, 0x00][..])
            .arg("-1");
        assert_eq!(
            call.evalsha().get_packed_command(),
            expected.get_packed_command()
        );
        assert_eq!(call.keys(), ["k1", "k2"]);
    }

    #[test]
    fn a_call_without_arguments_sends_none() {
        let call = ScriptCall::new(&ACQUIRE).key("k");
        let mut expected = redis::cmd("EVALSHA");
        let _ = expected.arg(ACQUIRE.get_hash()).arg(1).arg("k");
        assert_eq!(
            call.evalsha().get_packed_command(),
            expected.get_packed_command()
        );
    }
}
