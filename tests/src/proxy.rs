//! A loopback TCP proxy in front of one Redis node, with faults scripted per test.
//!
//! Pausing a server ([`RedisServer::pause`](crate::RedisServer::pause), `CLIENT PAUSE`) makes a reply
//! *late*; it cannot make a reply *lost* after the command ran. That is the case that matters most
//! for a lock client: a script took the lock (or released it, or took a permit) but its caller never
//! heard, because the connection dropped between the server's write and the client's read. A client
//! that re-sends then applies the same change twice; one that gives up leaves a hold behind. A
//! [`FaultProxy`] sits between the client and the node and produces exactly that, on demand:
//! [`lose_reply`](FaultProxy::lose_reply) lets a chosen request through to the server and then, as
//! its reply comes back, closes the client's connection and the server's instead of forwarding it.
//!
//! It also drops a chosen request and cuts its connection, so that the request never ran but its
//! client cannot know ([`drop_request`](FaultProxy::drop_request)), delays replies
//! ([`delay_replies`](FaultProxy::delay_replies)), black-holes one direction of every connection
//! ([`black_hole`](FaultProxy::black_hole)) or of one chosen among the
//! [`open_connections`](FaultProxy::open_connections), a client's subscriber connection say
//! ([`black_hole_connection`](FaultProxy::black_hole_connection)), resets every connection
//! ([`reset`](FaultProxy::reset)) and refuses new ones ([`refuse`](FaultProxy::refuse)).
//!
//! # Matching and counting
//!
//! The proxy parses what goes through it. Client→server bytes are cut into requests (RESP arrays of
//! bulk strings, or inline commands); each request is counted ([`requests`](FaultProxy::requests))
//! and checked against every armed fault's [`Match`]: the `nth` matching request from the moment
//! [`lose_reply`](FaultProxy::lose_reply) was called, over all connections of the proxy, is doomed.
//! Server→client bytes are cut into RESP2/RESP3 frames with [`frame_len`], and each connection keeps a
//! FIFO of the requests it forwarded whose replies are due: every reply frame answers the oldest.
//! Frames that answer no request are skipped: RESP3 pushes (`>`), and on a connection that has
//! subscribed, RESP2 pub/sub arrays (`message`, `subscribe`, ...). The `(P|S)(UN)SUBSCRIBE` requests
//! themselves are never put in the FIFO (their answers are such frames) nor doomed. Replies to the
//! requests before the doomed one are forwarded first, so a pipeline loses exactly one reply and
//! everything after it.
//!
//! Replies are forwarded whole frame by frame, a few microseconds after they are complete; a
//! connection on which something unparsable ever shows up (never with Redis) is forwarded raw from
//! then on, without counting. Commands that change how many replies Redis sends (`CLIENT REPLY`,
//! `MONITOR`) are not understood.
//!
//! The proxy runs on its own thread with its own tokio runtime, so it behaves the same under any
//! test runtime (or none); its controls are plain synchronous methods. Dropping it stops listening
//! and closes every connection.
//!
//! ```no_run
//! # async fn demo() -> redis::RedisResult<()> {
//! use std::time::Duration;
//! use rlock_tests::RedisServer;
//! use rlock_tests::proxy::{FaultProxy, Match};
//!
//! let server = RedisServer::start();
//! let proxy = FaultProxy::start(server.port());
//! let mut conn = redis::Client::open(proxy.url())?
//!     .get_multiplexed_async_connection()
//!     .await?;
//!
//! // The next INCR of `counter` runs on the server, but its caller only sees the connection drop.
//! proxy.lose_reply(Match::command("INCR").with_arg("counter"), 1);
//! let lost: redis::RedisResult<i64> = redis::cmd("INCR").arg("counter").query_async(&mut conn).await;
//! assert!(lost.is_err());
//! assert!(proxy.wait_lost_replies(1, Duration::from_secs(1)).await);
//! # Ok(())
//! # }
//! ```

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::net::TcpListener as StdTcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{ReadHalf, WriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, mpsc, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// How much one read takes from a socket.
const CHUNK: usize = 16 * 1024;
/// How deep RESP aggregates may nest before the input is taken for garbage (Redis nests a few levels).
const MAX_DEPTH: usize = 64;
/// How long [`FaultProxy::reset`] waits for the connections it resets to be gone.
const RESET_WAIT: Duration = Duration::from_secs(2);
/// Pause after a failed `accept` (e.g. out of file descriptors), so the loop does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(10);
/// Commands whose answers are pub/sub frames rather than replies.
const SUBSCRIPTION_COMMANDS: [&[u8]; 6] = [
    b"subscribe",
    b"psubscribe",
    b"ssubscribe",
    b"unsubscribe",
    b"punsubscribe",
    b"sunsubscribe",
];
/// First elements of the RESP2 arrays a subscribed connection receives that answer no request
/// (RESP2 has no push type; a subscribed `PING` is answered with `pong`, a real reply).
const PUBSUB_FRAMES: [&[u8]; 9] = [
    b"message",
    b"pmessage",
    b"smessage",
    b"subscribe",
    b"psubscribe",
    b"ssubscribe",
    b"unsubscribe",
    b"punsubscribe",
    b"sunsubscribe",
];

/// A loopback TCP proxy in front of one Redis node, with faults scripted per test.
///
/// Dropping it stops listening and closes every connection.
#[derive(Debug)]
pub struct FaultProxy {
    port: u16,
    upstream: u16,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

/// One direction of a proxied connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Requests, client → server.
    ToServer,
    /// Replies, server → client.
    ToClient,
}

/// Which requests a fault applies to.
#[derive(Clone, Debug, Default)]
pub struct Match {
    /// The command name, compared case-insensitively; `None` for any.
    command: Option<Vec<u8>>,
    /// Arguments that must all appear after the command name, byte-exact.
    args: Vec<Vec<u8>>,
}

impl Match {
    /// Every request.
    pub fn any() -> Self {
        Self::default()
    }

    /// Requests whose command name (first element) is `name`, case-insensitive (e.g. `"EVALSHA"`).
    pub fn command(name: &str) -> Self {
        Self {
            command: Some(name.as_bytes().to_vec()),
            args: Vec::new(),
        }
    }

    /// Also requires an argument (any element after the first) equal to `arg`, byte-exact. Chained,
    /// every given argument must appear.
    #[must_use]
    pub fn with_arg(mut self, arg: impl AsRef<[u8]>) -> Self {
        self.args.push(arg.as_ref().to_vec());
        self
    }

    fn matches(&self, request: &[&[u8]]) -> bool {
        let Some((name, args)) = request.split_first() else {
            return false;
        };
        self.command
            .as_ref()
            .is_none_or(|command| command.eq_ignore_ascii_case(name))
            && self
                .args
                .iter()
                .all(|wanted| args.iter().any(|arg| arg == wanted))
    }
}

/// Input that is not RESP: the proxy forwards that connection raw from then on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProtocolError(&'static str);

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "not RESP: {}", self.0)
    }
}

impl std::error::Error for ProtocolError {}

/// The length of the first complete RESP2/RESP3 frame at the start of `buf`, `None` while it is
/// incomplete.
///
/// An attribute (`|`) is not a frame by itself: it is counted with the frame it annotates, at the top
/// level as inside aggregates. Nulls (`_`, `$-1`, `*-1`) are one-line frames; streamed strings and
/// aggregates (`$?`, `*?`), which Redis never sends, are errors.
pub fn frame_len(buf: &[u8]) -> Result<Option<usize>, ProtocolError> {
    Ok(frame(buf, 0, 0)?.map(|(end, _)| end))
}

/// Where the frame starting at `start` ends, and its type byte (that of the annotated frame when it
/// begins with an attribute).
fn frame(buf: &[u8], start: usize, depth: usize) -> Result<Option<(usize, u8)>, ProtocolError> {
    if depth > MAX_DEPTH {
        return Err(ProtocolError("aggregates nested too deep"));
    }
    let Some(&kind) = buf.get(start) else {
        return Ok(None);
    };
    let Some((header, mut pos)) = line(buf, start + 1) else {
        return Ok(None);
    };
    match kind {
        b'+' | b'-' | b':' | b'_' | b'#' | b',' | b'(' => Ok(Some((pos, kind))),
        b'$' | b'!' | b'=' => {
            let Some(len) = length(header)? else {
                return Ok(Some((pos, kind)));
            };
            let end = pos
                .checked_add(len)
                .and_then(|end| end.checked_add(2))
                .ok_or(ProtocolError("string length overflows"))?;
            match buf.get(end - 2..end) {
                None => Ok(None),
                Some(b"\r\n") => Ok(Some((end, kind))),
                Some(_) => Err(ProtocolError("string not followed by CRLF")),
            }
        }
        b'*' | b'~' | b'>' | b'%' | b'|' => {
            let Some(len) = length(header)? else {
                return Ok(Some((pos, kind)));
            };
            let elements = if matches!(kind, b'%' | b'|') {
                len.checked_mul(2)
                    .ok_or(ProtocolError("map length overflows"))?
            } else {
                len
            };
            for _ in 0..elements {
                match frame(buf, pos, depth + 1)? {
                    Some((end, _)) => pos = end,
                    None => return Ok(None),
                }
            }
            if kind == b'|' {
                // The annotated frame follows; the caller sees the two as one.
                frame(buf, pos, depth + 1)
            } else {
                Ok(Some((pos, kind)))
            }
        }
        _ => Err(ProtocolError("unknown type byte")),
    }
}

/// The line starting at `from` (without its CRLF) and where the next one starts.
fn line(buf: &[u8], from: usize) -> Option<(&[u8], usize)> {
    let rest = buf.get(from..)?;
    let at = rest.windows(2).position(|pair| pair == b"\r\n")?;
    Some((&rest[..at], from + at + 2))
}

/// A length header: `None` for `-1` (null).
fn length(header: &[u8]) -> Result<Option<usize>, ProtocolError> {
    if header == b"-1" {
        return Ok(None);
    }
    if header.is_empty() || !header.iter().all(u8::is_ascii_digit) {
        return Err(ProtocolError("bad length"));
    }
    std::str::from_utf8(header)
        .ok()
        .and_then(|digits| digits.parse().ok())
        .map(Some)
        .ok_or(ProtocolError("bad length"))
}

/// A parsed request: its length in bytes and its elements (the command name first).
type Request<'a> = (usize, Vec<&'a [u8]>);

/// The first complete request at the start of `buf` (its length and its elements), `None` while it
/// is incomplete. A request is an array of bulk strings, or an inline command: a line of
/// space-separated words that does not start with `*`.
fn next_request(buf: &[u8]) -> Result<Option<Request<'_>>, ProtocolError> {
    if buf.first() != Some(&b'*') {
        let Some(at) = buf.iter().position(|&byte| byte == b'\n') else {
            return Ok(None);
        };
        let line = buf[..at].strip_suffix(b"\r").unwrap_or(&buf[..at]);
        let words = line
            .split(|byte| matches!(byte, b' ' | b'\t'))
            .filter(|word| !word.is_empty())
            .collect();
        return Ok(Some((at + 1, words)));
    }
    let Some(len) = frame_len(buf)? else {
        return Ok(None);
    };
    let (header, mut pos) = line(buf, 1).ok_or(ProtocolError("request without header"))?;
    let count = length(header)?.unwrap_or(0);
    let mut elements = Vec::with_capacity(count.min(64));
    for _ in 0..count {
        if buf.get(pos) != Some(&b'$') {
            return Err(ProtocolError("request element is not a bulk string"));
        }
        let (header, start) = line(buf, pos + 1).ok_or(ProtocolError("bad request element"))?;
        let size = length(header)?.ok_or(ProtocolError("null request element"))?;
        elements.push(&buf[start..start + size]);
        pos = start + size + 2;
    }
    Ok(Some((len, elements)))
}

/// The first element of a (complete) RESP2 array frame, if it is a bulk string.
fn first_bulk(frame: &[u8]) -> Option<&[u8]> {
    if frame.first() != Some(&b'*') {
        return None;
    }
    let (_, pos) = line(frame, 1)?;
    if frame.get(pos) != Some(&b'$') {
        return None;
    }
    let (header, start) = line(frame, pos + 1)?;
    let size = length(header).ok()??;
    frame.get(start..start + size)
}

/// State shared by the handle, the accept loop and every connection.
#[derive(Debug, Default)]
struct Shared {
    /// Lost-reply faults armed and not fired yet.
    armed: Mutex<Vec<Armed>>,
    /// Dropped-request faults armed and not fired yet.
    unsent: Mutex<Vec<Armed>>,
    /// Dropped-request faults fired.
    dropped: AtomicUsize,
    /// Reply delay, in nanoseconds.
    delay: AtomicU64,
    hole_to_server: AtomicBool,
    hole_to_client: AtomicBool,
    refuse: AtomicBool,
    connections: AtomicUsize,
    requests: AtomicUsize,
    lost: AtomicUsize,
    /// Signalled whenever `lost` grows.
    lost_changed: Notify,
    /// Bumped by every reset; connections watch it.
    resets: watch::Sender<u64>,
    /// Open connections: id → the reset epoch they were accepted in, and what the handle sees of
    /// and sets on each.
    open: Mutex<HashMap<u64, (u64, Arc<ConnFlags>)>>,
    next_id: AtomicU64,
    shutdown: CancellationToken,
}

/// What the handle sees of, and sets on, one connection.
#[derive(Debug, Default)]
struct ConnFlags {
    /// A subscription command went through it.
    subscribed: AtomicBool,
    /// Requests forwarded through it.
    requests: AtomicUsize,
    hole_to_server: AtomicBool,
    hole_to_client: AtomicBool,
}

/// An open connection through a [`FaultProxy`], as [`FaultProxy::open_connections`] lists it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpenConnection {
    /// Its id, for [`FaultProxy::black_hole_connection`]: connections are numbered from 0 in the
    /// order they were accepted.
    pub id: u64,
    /// A subscription command (`SUBSCRIBE`, `PSUBSCRIBE`, `SSUBSCRIBE`, or their un-) went through
    /// it: a client's subscriber connection.
    pub subscribed: bool,
    /// Requests forwarded through it so far (subscription commands included).
    pub requests: usize,
}

/// One armed lost-reply fault.
#[derive(Debug)]
struct Armed {
    matching: Match,
    /// Matching requests still to let through, the doomed one included.
    remaining: usize,
}

impl Shared {
    /// Whether `request` is doomed: the last one some armed fault was waiting for (which disarms
    /// it). A doomed request carries its fault, to re-arm it should the request not run after all.
    fn doom(&self, request: &[&[u8]]) -> Option<Match> {
        let mut armed = self.armed.lock();
        if armed.is_empty() {
            return None;
        }
        let mut doomed = None;
        armed.retain_mut(|fault| {
            if !fault.matching.matches(request) {
                return true;
            }
            fault.remaining -= 1;
            if fault.remaining == 0 {
                doomed = Some(fault.matching.clone());
            }
            fault.remaining > 0
        });
        doomed
    }

    /// Whether `request` is the one an armed dropped-request fault waits for (which disarms it).
    fn unsend(&self, request: &[&[u8]]) -> bool {
        let mut unsent = self.unsent.lock();
        let mut fired = false;
        unsent.retain_mut(|fault| {
            if fired || !fault.matching.matches(request) {
                return true;
            }
            fault.remaining -= 1;
            fired = fault.remaining == 0;
            !fired
        });
        fired
    }

    /// Arms `matching` again for the next matching request.
    fn rearm(&self, matching: Match) {
        self.armed.lock().push(Armed {
            matching,
            remaining: 1,
        });
    }

    fn delay(&self) -> Duration {
        Duration::from_nanos(self.delay.load(Ordering::Relaxed))
    }
}

impl FaultProxy {
    /// Listens on `127.0.0.1:<free port>` and forwards every connection to `127.0.0.1:<upstream>`.
    ///
    /// Runs on its own thread with its own tokio runtime, so it works the same from sync code, from
    /// a current-thread `#[tokio::test]` and from a multi-thread runtime.
    ///
    /// # Panics
    ///
    /// If it cannot bind a loopback port or start its thread.
    pub fn start(upstream: u16) -> Self {
        let listener =
            StdTcpListener::bind("127.0.0.1:0").expect("fault proxy: cannot bind 127.0.0.1:0");
        let port = listener
            .local_addr()
            .expect("fault proxy: bound listener has an address")
            .port();
        listener
            .set_nonblocking(true)
            .expect("fault proxy: cannot make the listener non-blocking");
        let shared = Arc::new(Shared::default());
        let thread = thread::Builder::new()
            .name(format!("fault-proxy-{port}"))
            .spawn({
                let shared = Arc::clone(&shared);
                move || {
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .expect("fault proxy: cannot build its tokio runtime");
                    runtime.block_on(async move {
                        let listener = TcpListener::from_std(listener)
                            .expect("fault proxy: cannot register the listener with tokio");
                        accept_loop(listener, upstream, shared).await;
                    });
                    // Dropping the runtime drops every connection task, closing its sockets.
                }
            })
            .expect("fault proxy: cannot spawn its thread");
        Self {
            port,
            upstream,
            shared,
            thread: Some(thread),
        }
    }

    /// The loopback port the proxy listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The port of the node the proxy forwards to.
    pub fn upstream(&self) -> u16 {
        self.upstream
    }

    /// The URL to connect through the proxy: `redis://127.0.0.1:<port>/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Arms a lost reply: the `nth` (1-based, counted from now, over all connections of this proxy)
    /// request matching `matching` is forwarded to the server, and then, before its reply reaches
    /// the client, that client connection and its server connection are closed (nothing of the reply
    /// nor of anything after it is forwarded). Fires once. Replies to requests sent before the doomed
    /// one on that connection are still forwarded first.
    ///
    /// A doomed request answered `NOSCRIPT` did not run: its reply goes through and the fault
    /// moves on to the next matching request (redis-rs then loads the script and sends it again).
    ///
    /// Several faults may be armed at once; each counts its own matches. A doomed request whose
    /// connection closes before its reply comes spends its fault without firing it.
    ///
    /// # Panics
    ///
    /// If `nth` is 0.
    pub fn lose_reply(&self, matching: Match, nth: usize) {
        assert!(nth > 0, "lose_reply: nth counts from 1");
        self.shared.armed.lock().push(Armed {
            matching,
            remaining: nth,
        });
    }

    /// Arms a request that never runs: the `nth` (1-based, counted from now, over all connections
    /// of this proxy) request matching `matching` is not forwarded, and its connection is closed at
    /// once, both sides, after the requests before it were forwarded. Its client sees the
    /// connection break and cannot tell that the request never ran: the other half of what
    /// [`lose_reply`](Self::lose_reply) makes. Fires once.
    ///
    /// # Panics
    ///
    /// If `nth` is 0.
    pub fn drop_request(&self, matching: Match, nth: usize) {
        assert!(nth > 0, "drop_request: nth counts from 1");
        self.shared.unsent.lock().push(Armed {
            matching,
            remaining: nth,
        });
    }

    /// How many dropped-request faults have fired so far.
    pub fn dropped_requests(&self) -> usize {
        self.shared.dropped.load(Ordering::SeqCst)
    }

    /// How many lost-reply faults have fired so far (counted once both sockets are closed).
    pub fn lost_replies(&self) -> usize {
        self.shared.lost.load(Ordering::SeqCst)
    }

    /// Waits until [`lost_replies`](Self::lost_replies) reaches `n` or `limit` passes; returns
    /// whether it did. Needs a tokio runtime with timers (any `#[tokio::test]`).
    pub async fn wait_lost_replies(&self, n: usize, limit: Duration) -> bool {
        let reached = async {
            loop {
                // Registered before the check, so a fault firing in between is not missed.
                let changed = self.shared.lost_changed.notified();
                if self.lost_replies() >= n {
                    return;
                }
                changed.await;
            }
        };
        tokio::time::timeout(limit, reached).await.is_ok()
    }

    /// Delays every server→client byte by `delay` from now on, keeping their order
    /// (`Duration::ZERO` turns it off). Bytes are stamped as they arrive, so turning it off does not
    /// hurry bytes already waiting.
    pub fn delay_replies(&self, delay: Duration) {
        let nanos = u64::try_from(delay.as_nanos()).unwrap_or(u64::MAX);
        self.shared.delay.store(nanos, Ordering::Relaxed);
    }

    /// Black-holes one direction (bytes read and discarded, connections stay open), or heals it.
    ///
    /// Whole frames are discarded. Requests discarded are not counted; replies discarded still
    /// answer their requests (a doomed one still closes its connection).
    pub fn black_hole(&self, direction: Direction, on: bool) {
        let flag = match direction {
            Direction::ToServer => &self.shared.hole_to_server,
            Direction::ToClient => &self.shared.hole_to_client,
        };
        flag.store(on, Ordering::SeqCst);
    }

    /// The connections open now, in the order they were accepted.
    pub fn open_connections(&self) -> Vec<OpenConnection> {
        let mut open: Vec<OpenConnection> = self
            .shared
            .open
            .lock()
            .iter()
            .map(|(&id, (_, flags))| OpenConnection {
                id,
                subscribed: flags.subscribed.load(Ordering::SeqCst),
                requests: flags.requests.load(Ordering::SeqCst),
            })
            .collect();
        open.sort_by_key(|connection| connection.id);
        open
    }

    /// Black-holes one direction of the open connection `id` (see
    /// [`open_connections`](Self::open_connections)) alone, or heals it, as
    /// [`black_hole`](Self::black_hole) does for every connection: the others go on. Black-holing
    /// [`Direction::ToClient`] of a subscriber connection makes a deaf subscriber: its client
    /// believes it listens, and hears nothing. Returns whether the connection is open.
    pub fn black_hole_connection(&self, id: u64, direction: Direction, on: bool) -> bool {
        let open = self.shared.open.lock();
        let Some((_, flags)) = open.get(&id) else {
            return false;
        };
        let flag = match direction {
            Direction::ToServer => &flags.hole_to_server,
            Direction::ToClient => &flags.hole_to_client,
        };
        flag.store(on, Ordering::SeqCst);
        true
    }

    /// Closes every open connection now with a TCP reset (`SO_LINGER` 0), both sides, and returns
    /// once they are closed. New connections are still accepted.
    pub fn reset(&self) {
        let mut epoch = 0;
        self.shared.resets.send_modify(|current| {
            *current += 1;
            epoch = *current;
        });
        // Block (briefly) so that the caller's next command cannot slip through a connection that
        // has not seen the reset yet.
        let until = std::time::Instant::now() + RESET_WAIT;
        while self
            .shared
            .open
            .lock()
            .values()
            .any(|(since, _)| *since < epoch)
            && std::time::Instant::now() < until
        {
            thread::sleep(Duration::from_millis(1));
        }
    }

    /// Refuses new connections (accepted, then reset at once) while `on`.
    pub fn refuse(&self, on: bool) {
        self.shared.refuse.store(on, Ordering::SeqCst);
    }

    /// Connections accepted so far (refused ones included).
    pub fn connections(&self) -> usize {
        self.shared.connections.load(Ordering::SeqCst)
    }

    /// Requests forwarded so far (empty ones and black-holed ones are not counted).
    pub fn requests(&self) -> usize {
        self.shared.requests.load(Ordering::SeqCst)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.shared.shutdown.cancel();
        if let Some(thread) = self.thread.take() {
            // Quick: the accept loop returns at once and the runtime's drop only drops tasks.
            let _ = thread.join();
        }
    }
}

async fn accept_loop(listener: TcpListener, upstream: u16, shared: Arc<Shared>) {
    loop {
        let accepted = tokio::select! {
            () = shared.shutdown.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        let Ok((client, _)) = accepted else {
            tokio::time::sleep(ACCEPT_BACKOFF).await;
            continue;
        };
        shared.connections.fetch_add(1, Ordering::SeqCst);
        if shared.refuse.load(Ordering::SeqCst) {
            let _ = client.set_zero_linger();
            continue;
        }
        // Registered here, before any await, so a reset from now on reaches this connection.
        let resets = shared.resets.subscribe();
        let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
        let flags = Arc::new(ConnFlags::default());
        shared
            .open
            .lock()
            .insert(id, (*resets.borrow(), Arc::clone(&flags)));
        let open = Open {
            shared: Arc::clone(&shared),
            id,
        };
        tokio::spawn(handle(client, upstream, open, resets, flags));
    }
}

/// An entry in [`Shared::open`], removed when the connection task ends or is dropped.
struct Open {
    shared: Arc<Shared>,
    id: u64,
}

impl Drop for Open {
    fn drop(&mut self) {
        self.shared.open.lock().remove(&self.id);
    }
}

/// How a proxied connection ended.
enum End {
    /// Either side closed, or an I/O error.
    Closed,
    /// A doomed reply arrived: closed instead of forwarded.
    Doomed,
    /// [`FaultProxy::reset`].
    Reset,
}

async fn handle(
    client: TcpStream,
    upstream: u16,
    open: Open,
    resets: watch::Receiver<u64>,
    flags: Arc<ConnFlags>,
) {
    let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)).await else {
        // The node is down: the client sees it as a reset, as it would connecting directly.
        let _ = client.set_zero_linger();
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let shared = Arc::clone(&open.shared);
    let end = serve(client, server, &shared, resets, flags).await;
    // Both sockets are closed by now: a test that saw the count may rely on it.
    drop(open);
    if matches!(end, End::Doomed) {
        shared.lost.fetch_add(1, Ordering::SeqCst);
        shared.lost_changed.notify_waiters();
    }
}

/// Per-connection protocol state, shared by its two directions.
#[derive(Debug, Default)]
struct Conn {
    /// One entry per forwarded request whose reply is due, oldest first: the fault that dooms it.
    due: VecDeque<Option<Match>>,
    /// Something unparsable went through: forward raw, count nothing.
    raw: bool,
    /// A subscription command went through: RESP2 pub/sub arrays may come.
    subscribed: bool,
    /// A dropped-request fault fired: close once what came before it is forwarded.
    cut: bool,
    /// What the handle sees of it and sets on it.
    flags: Arc<ConnFlags>,
}

impl Conn {
    /// Notes a forwarded request (not empty).
    fn request(&mut self, request: &[&[u8]], shared: &Shared) {
        shared.requests.fetch_add(1, Ordering::SeqCst);
        self.flags.requests.fetch_add(1, Ordering::SeqCst);
        let name = request[0];
        if SUBSCRIPTION_COMMANDS
            .iter()
            .any(|command| command.eq_ignore_ascii_case(name))
        {
            self.subscribed = true;
            self.flags.subscribed.store(true, Ordering::SeqCst);
            return;
        }
        let doomed = shared.doom(request);
        self.due.push_back(doomed);
    }

    /// Whether a complete frame answers no request.
    fn out_of_band(&self, frame: &[u8], kind: u8) -> bool {
        kind == b'>'
            || (self.subscribed
                && first_bulk(frame).is_some_and(|first| {
                    PUBSUB_FRAMES
                        .iter()
                        .any(|name| name.eq_ignore_ascii_case(first))
                }))
    }
}

async fn serve(
    mut client: TcpStream,
    mut server: TcpStream,
    shared: &Shared,
    mut resets: watch::Receiver<u64>,
    flags: Arc<ConnFlags>,
) -> End {
    let conn = Mutex::new(Conn {
        flags,
        ..Conn::default()
    });
    let end = {
        let (client_read, client_write) = client.split();
        let (server_read, server_write) = server.split();
        tokio::select! {
            () = forward_requests(client_read, server_write, shared, &conn) => End::Closed,
            doomed = forward_replies(server_read, client_write, shared, &conn) => {
                if doomed { End::Doomed } else { End::Closed }
            }
            _ = resets.changed() => End::Reset,
        }
    };
    if matches!(end, End::Reset) {
        let _ = client.set_zero_linger();
        let _ = server.set_zero_linger();
    }
    end
}

/// Client → server, whole requests at a time, until either side closes.
async fn forward_requests(
    mut from: ReadHalf<'_>,
    mut to: WriteHalf<'_>,
    shared: &Shared,
    conn: &Mutex<Conn>,
) {
    let mut buf = Vec::with_capacity(CHUNK);
    let mut chunk = vec![0; CHUNK];
    loop {
        let read = match from.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(read) => read,
        };
        buf.extend_from_slice(&chunk[..read]);
        // The due FIFO is appended before the requests are written, so their replies find it.
        let (ready, hole) = {
            let mut conn = conn.lock();
            let hole = shared.hole_to_server.load(Ordering::SeqCst)
                || conn.flags.hole_to_server.load(Ordering::SeqCst);
            (split_requests(&buf, hole, shared, &mut conn), hole)
        };
        if !hole && ready > 0 && to.write_all(&buf[..ready]).await.is_err() {
            return;
        }
        if conn.lock().cut {
            shared.dropped.fetch_add(1, Ordering::SeqCst);
            return;
        }
        buf.drain(..ready);
    }
}

/// How many bytes at the start of `buf` are whole requests (all of it once raw), noting each one
/// unless black-holed; a dropped request and what follows it are not among them (the connection is
/// cut).
fn split_requests(buf: &[u8], hole: bool, shared: &Shared, conn: &mut Conn) -> usize {
    if conn.raw {
        return buf.len();
    }
    let mut pos = 0;
    while pos < buf.len() {
        match next_request(&buf[pos..]) {
            Ok(None) => break,
            Ok(Some((len, request))) => {
                // Redis answers nothing to an empty request.
                if !hole && !request.is_empty() {
                    if shared.unsend(&request) {
                        conn.cut = true;
                        return pos;
                    }
                    conn.request(&request, shared);
                }
                pos += len;
            }
            Err(_) => {
                conn.raw = true;
                return buf.len();
            }
        }
    }
    pos
}

/// What the reply reader hands the client writer.
enum Out {
    /// Bytes to write at that instant.
    Bytes(Instant, Vec<u8>),
    /// A doomed reply came: close the client after what was queued before.
    Close,
}

/// Server → client until either side closes; true when it ended on a doomed reply.
async fn forward_replies(
    from: ReadHalf<'_>,
    to: WriteHalf<'_>,
    shared: &Shared,
    conn: &Mutex<Conn>,
) -> bool {
    let (queue, queued) = mpsc::unbounded_channel();
    let reader = read_replies(from, queue, shared, conn);
    let writer = write_replies(to, queued);
    tokio::pin!(reader, writer);
    let mut reading = true;
    loop {
        tokio::select! {
            doomed = &mut writer => return doomed,
            // The server closed: the writer still flushes what is queued, then ends.
            () = &mut reader, if reading => reading = false,
        }
    }
}

/// Reads replies, stamps them and queues them for the writer, frame by frame; stops after a doomed
/// reply (queueing [`Out::Close`] instead of it) or when the server closes.
async fn read_replies(
    mut from: ReadHalf<'_>,
    queue: mpsc::UnboundedSender<Out>,
    shared: &Shared,
    conn: &Mutex<Conn>,
) {
    let mut buf = Vec::with_capacity(CHUNK);
    let mut chunk = vec![0; CHUNK];
    loop {
        let read = match from.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(read) => read,
        };
        let at = Instant::now() + shared.delay();
        buf.extend_from_slice(&chunk[..read]);
        let (ready, doomed, hole) = {
            let mut conn = conn.lock();
            let (ready, doomed) = split_replies(&buf, &mut conn, shared);
            let hole = shared.hole_to_client.load(Ordering::SeqCst)
                || conn.flags.hole_to_client.load(Ordering::SeqCst);
            (ready, doomed, hole)
        };
        if ready > 0 && !hole && queue.send(Out::Bytes(at, buf[..ready].to_vec())).is_err() {
            return;
        }
        if doomed {
            let _ = queue.send(Out::Close);
            return;
        }
        buf.drain(..ready);
    }
}

/// How many bytes at the start of `buf` are whole frames to forward (all of it once raw), and
/// whether a doomed reply follows them.
///
/// A doomed script call answered `NOSCRIPT` did not run (the client loads the script and sends it
/// again): that reply goes through and its fault is armed again for the next matching request, so a
/// lost reply is always the reply of a request that ran.
fn split_replies(buf: &[u8], conn: &mut Conn, shared: &Shared) -> (usize, bool) {
    if conn.raw {
        return (buf.len(), false);
    }
    let mut pos = 0;
    while pos < buf.len() {
        match frame(buf, pos, 0) {
            Ok(None) => break,
            Ok(Some((end, kind))) => {
                if !conn.out_of_band(&buf[pos..end], kind)
                    && let Some(Some(fault)) = conn.due.pop_front()
                {
                    if !buf[pos..end].starts_with(b"-NOSCRIPT") {
                        return (pos, true);
                    }
                    shared.rearm(fault);
                }
                pos = end;
            }
            Err(_) => {
                conn.raw = true;
                return (buf.len(), false);
            }
        }
    }
    (pos, false)
}

/// Writes queued replies to the client, each at its instant; true when it ended on [`Out::Close`].
async fn write_replies(mut to: WriteHalf<'_>, mut queued: mpsc::UnboundedReceiver<Out>) -> bool {
    while let Some(out) = queued.recv().await {
        match out {
            Out::Bytes(at, bytes) => {
                if at > Instant::now() {
                    tokio::time::sleep_until(at).await;
                }
                if to.write_all(&bytes).await.is_err() {
                    return false;
                }
            }
            Out::Close => return true,
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn len(buf: &[u8]) -> Option<usize> {
        frame_len(buf).expect("valid RESP")
    }

    #[test]
    fn simple_frames() {
        for frame in [
            &b"+OK\r\n"[..],
            b"-ERR wrong\r\n",
            b":42\r\n",
            b"_\r\n",
            b"#t\r\n",
            b",3.14\r\n",
            b"(12345678901234567890\r\n",
        ] {
            assert_eq!(len(frame), Some(frame.len()), "{frame:?}");
            let mut two = frame.to_vec();
            two.extend_from_slice(b"+next\r\n");
            assert_eq!(len(&two), Some(frame.len()), "followed: {frame:?}");
        }
    }

    #[test]
    fn strings_and_nulls() {
        assert_eq!(len(b"$5\r\nhello\r\n"), Some(11));
        assert_eq!(len(b"$0\r\n\r\n"), Some(6));
        // A bulk string may contain CRLF: its length decides.
        assert_eq!(len(b"$4\r\na\r\nb\r\n:1\r\n"), Some(10));
        assert_eq!(len(b"$-1\r\n:1\r\n"), Some(5));
        assert_eq!(len(b"*-1\r\n"), Some(5));
        assert_eq!(len(b"!3\r\nERR\r\n"), Some(9));
        assert_eq!(len(b"=7\r\ntxt:abc\r\n"), Some(13));
        assert_eq!(len(b"*0\r\n"), Some(4));
        assert_eq!(len(b"%0\r\n"), Some(4));
    }

    #[test]
    fn aggregates_nest() {
        let nested = b"*3\r\n:1\r\n*2\r\n$1\r\na\r\n%1\r\n+k\r\n~2\r\n_\r\n#f\r\n$-1\r\n";
        assert_eq!(len(nested), Some(nested.len()));
        let mut more = nested.to_vec();
        more.extend_from_slice(b"+OK\r\n");
        assert_eq!(len(&more), Some(nested.len()));
        // A map has two elements per entry.
        assert_eq!(len(b"%2\r\n+a\r\n:1\r\n+b\r\n"), None);
        assert_eq!(len(b"%2\r\n+a\r\n:1\r\n+b\r\n:2\r\n"), Some(20));
    }

    #[test]
    fn partial_frames_wait_for_more() {
        let whole = b"*2\r\n$3\r\nGET\r\n$10\r\n0123456789\r\n";
        for cut in 0..whole.len() {
            assert_eq!(len(&whole[..cut]), None, "cut at {cut}");
        }
        assert_eq!(len(whole), Some(whole.len()));
    }

    #[test]
    fn push_is_a_frame_of_its_own() {
        let push = b">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$3\r\nhi!\r\n";
        let mut buf = push.to_vec();
        buf.extend_from_slice(b"+PONG\r\n");
        assert_eq!(frame(&buf, 0, 0), Ok(Some((push.len(), b'>'))));
        assert_eq!(
            frame(&buf, push.len(), 0),
            Ok(Some((buf.len(), b'+'))),
            "the reply after it"
        );
    }

    #[test]
    fn attribute_goes_with_the_frame_it_annotates() {
        let attribute = b"|1\r\n+ttl\r\n:3600\r\n";
        let mut buf = attribute.to_vec();
        assert_eq!(len(&buf), None, "an attribute alone is not a reply");
        buf.extend_from_slice(b"$2\r\nhi\r\n");
        assert_eq!(frame(&buf, 0, 0), Ok(Some((buf.len(), b'$'))));
        // Inside an aggregate, an attribute is not an element.
        let inner = b"*2\r\n|1\r\n+a\r\n+b\r\n:1\r\n:2\r\n";
        assert_eq!(len(inner), Some(inner.len()));
        assert_eq!(len(&inner[..inner.len() - 4]), None);
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(frame_len(b"hello\r\n").is_err());
        assert!(frame_len(b"$x\r\n").is_err());
        assert!(frame_len(b"$?\r\n").is_err());
        assert!(frame_len(b"$-2\r\n").is_err());
        assert!(frame_len(b"$2\r\nabcd\r\n").is_err());
        assert!(frame_len(&b"*1\r\n".repeat(100)).is_err(), "too deep");
    }

    #[test]
    fn requests_parse() {
        let pipeline = b"*2\r\n$4\r\nINCR\r\n$1\r\nk\r\nPING hi\r\n*1\r\n$4\r\nPI";
        let (first, args) = next_request(pipeline).expect("valid").expect("complete");
        assert_eq!(args, [&b"INCR"[..], b"k"]);
        let (second, args) = next_request(&pipeline[first..])
            .expect("valid")
            .expect("complete");
        assert_eq!(args, [&b"PING"[..], b"hi"]);
        assert_eq!(
            next_request(&pipeline[first + second..]).expect("valid"),
            None
        );
        let (_, args) = next_request(b"\r\n").expect("valid").expect("complete");
        assert!(args.is_empty(), "an empty line is an empty request");
        assert!(next_request(b"*1\r\n:1\r\n").is_err());
    }

    #[test]
    fn matching() {
        let request = [&b"evalsha"[..], b"abc", b"1", b"lock"];
        assert!(Match::any().matches(&request));
        assert!(Match::command("EVALSHA").matches(&request));
        assert!(Match::command("EVALSHA").with_arg("lock").matches(&request));
        assert!(
            Match::command("EVALSHA")
                .with_arg("lock")
                .with_arg(b"abc")
                .matches(&request)
        );
        assert!(!Match::command("EVALSHA").with_arg("LOCK").matches(&request));
        assert!(!Match::command("EVAL").matches(&request));
        assert!(!Match::any().with_arg("evalsha").matches(&request));
        assert!(!Match::any().matches(&[]));
    }

    #[test]
    fn replies_answer_the_oldest_request() {
        let shared = Shared::default();
        let doomed = || Some(Match::any());
        let mut conn = Conn {
            due: VecDeque::from([None, doomed(), None]),
            ..Conn::default()
        };
        let replies = b"+OK\r\n>2\r\n$4\r\nsome\r\n$4\r\npush\r\n:1\r\n";
        assert_eq!(split_replies(replies, &mut conn, &shared), (29, true));
        assert_eq!(conn.due.len(), 1);
        // A doomed request that did not run (NOSCRIPT) is answered, and its fault armed again.
        let mut unloaded = Conn {
            due: VecDeque::from([doomed(), None]),
            ..Conn::default()
        };
        let noscript = b"-NOSCRIPT No matching script\r\n:1\r\n";
        assert_eq!(
            split_replies(noscript, &mut unloaded, &shared),
            (noscript.len(), false)
        );
        assert_eq!(shared.armed.lock().len(), 1, "armed again");
        // RESP2 pub/sub arrays answer nothing, but only on a subscribed connection.
        let message = b"*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$1\r\nx\r\n";
        let mut subscribed = Conn {
            due: VecDeque::from([doomed()]),
            subscribed: true,
            ..Conn::default()
        };
        assert_eq!(
            split_replies(message, &mut subscribed, &shared),
            (message.len(), false)
        );
        let mut plain = Conn {
            due: VecDeque::from([doomed()]),
            ..Conn::default()
        };
        assert_eq!(split_replies(message, &mut plain, &shared), (0, true));
    }
}
