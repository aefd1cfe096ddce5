//! The fault proxy against a real `redis-server`: it forwards, loses exactly the reply it was told to
//! (after the command ran, and after the replies before it), delays, black-holes (every connection or
//! one chosen), resets, refuses, and counts replies right around RESP3 pushes and RESP2 pub/sub
//! messages.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use rlock_tests::RedisServer;
use rlock_tests::proxy::{Direction, FaultProxy, Match, frame_len};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A multiplexed connection to `url` without redis-rs's response timeout (the tests time out
/// themselves where they mean to).
async fn connect(url: &str) -> redis::RedisResult<MultiplexedConnection> {
    redis::Client::open(url)?
        .get_multiplexed_async_connection_with_config(
            &redis::AsyncConnectionConfig::new().set_response_timeout(None),
        )
        .await
}

async fn through(proxy: &FaultProxy) -> MultiplexedConnection {
    connect(&proxy.url())
        .await
        .expect("connect through the proxy")
}

async fn direct(server: &RedisServer) -> MultiplexedConnection {
    connect(&server.url()).await.expect("connect directly")
}

async fn incr(conn: &mut MultiplexedConnection, key: &str) -> redis::RedisResult<i64> {
    redis::cmd("INCR").arg(key).query_async(conn).await
}

async fn get(conn: &mut MultiplexedConnection, key: &str) -> Option<String> {
    redis::cmd("GET")
        .arg(key)
        .query_async(conn)
        .await
        .expect("GET")
}

async fn ping(conn: &mut MultiplexedConnection) -> redis::RedisResult<String> {
    redis::cmd("PING").query_async(conn).await
}

/// `parts` as a RESP request.
fn request(parts: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", parts.len()).into_bytes();
    for part in parts {
        out.extend_from_slice(format!("${}\r\n{part}\r\n", part.len()).as_bytes());
    }
    out
}

/// A raw TCP connection through the proxy, with the bytes read but not yet taken.
struct Raw {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Raw {
    async fn connect(proxy: &FaultProxy) -> Self {
        let stream = TcpStream::connect(("127.0.0.1", proxy.port()))
            .await
            .expect("raw connect");
        Self {
            stream,
            buf: Vec::new(),
        }
    }

    async fn send(&mut self, requests: &[&[&str]]) {
        let bytes: Vec<u8> = requests.iter().flat_map(|parts| request(parts)).collect();
        self.stream.write_all(&bytes).await.expect("raw write");
    }

    /// The next whole frame, or `None` once the connection is closed.
    async fn frame(&mut self) -> Option<Vec<u8>> {
        loop {
            if let Some(len) = frame_len(&self.buf).expect("Redis speaks RESP") {
                return Some(self.buf.drain(..len).collect());
            }
            let mut chunk = [0; 4096];
            let read = tokio::time::timeout(Duration::from_secs(2), self.stream.read(&mut chunk))
                .await
                .expect("a frame or a close within 2 s");
            match read {
                Ok(0) | Err(_) => return None,
                Ok(read) => self.buf.extend_from_slice(&chunk[..read]),
            }
        }
    }

    async fn expect_frame(&mut self, what: &str) -> String {
        let frame = self
            .frame()
            .await
            .unwrap_or_else(|| panic!("{what}: connection closed"));
        String::from_utf8(frame).expect("UTF-8 frame")
    }
}

#[tokio::test]
async fn forwards_and_counts() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    assert_eq!(proxy.url(), format!("redis://127.0.0.1:{}/", proxy.port()));
    let mut conn = through(&proxy).await;
    let before = proxy.requests();
    let _: () = redis::cmd("SET")
        .arg("a")
        .arg("1")
        .query_async(&mut conn)
        .await
        .expect("SET");
    assert_eq!(get(&mut conn, "a").await.as_deref(), Some("1"));
    assert_eq!(proxy.requests() - before, 2);
    assert_eq!(proxy.connections(), 1);
    assert_eq!(
        get(&mut direct(&server).await, "a").await.as_deref(),
        Some("1")
    );
}

#[test]
fn works_from_sync_code_with_inline_commands() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", proxy.port())).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(2)))
        .expect("read timeout");
    stream.write_all(b"PING\r\nECHO hi\r\n").expect("write");
    let mut replies = Vec::new();
    while replies.len() < b"+PONG\r\n$2\r\nhi\r\n".len() {
        let mut chunk = [0; 64];
        let read = stream.read(&mut chunk).expect("read");
        assert!(read > 0, "closed early");
        replies.extend_from_slice(&chunk[..read]);
    }
    assert_eq!(replies, b"+PONG\r\n$2\r\nhi\r\n");
    assert_eq!(proxy.requests(), 2);
}

#[tokio::test]
async fn a_lost_reply_ran_on_the_server() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    let mut conn = through(&proxy).await;
    proxy.lose_reply(Match::command("INCR").with_arg("k"), 1);
    assert!(incr(&mut conn, "other").await.is_ok(), "not matching");
    assert!(incr(&mut conn, "k").await.is_err(), "the reply is lost");
    assert!(proxy.wait_lost_replies(1, Duration::from_secs(1)).await);
    assert_eq!(
        get(&mut direct(&server).await, "k").await.as_deref(),
        Some("1")
    );
    // Fired once: a new connection works, and the next INCR is answered.
    let mut conn = through(&proxy).await;
    assert_eq!(incr(&mut conn, "k").await.expect("INCR answered"), 2);
    assert_eq!(proxy.lost_replies(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_nth_match_is_lost() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    let mut conn = through(&proxy).await;
    proxy.lose_reply(Match::command("incr").with_arg("k"), 2);
    assert_eq!(
        incr(&mut conn, "k").await.expect("the first is answered"),
        1
    );
    assert!(incr(&mut conn, "k").await.is_err(), "the second is lost");
    let mut conn = through(&proxy).await;
    assert_eq!(
        incr(&mut conn, "k").await.expect("the third is answered"),
        3
    );
    assert_eq!(proxy.lost_replies(), 1);
}

#[tokio::test]
async fn replies_before_the_lost_one_are_delivered() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    proxy.lose_reply(Match::command("INCR"), 1);
    let mut raw = Raw::connect(&proxy).await;
    raw.send(&[&["SET", "a", "1"], &["INCR", "k"]]).await;
    assert_eq!(raw.expect_frame("SET").await, "+OK\r\n");
    assert_eq!(raw.frame().await, None, "INCR's reply is lost");
    assert!(raw.buf.is_empty(), "nothing of it came through");
    let mut redis = direct(&server).await;
    assert_eq!(get(&mut redis, "a").await.as_deref(), Some("1"));
    assert_eq!(get(&mut redis, "k").await.as_deref(), Some("1"));
    assert!(proxy.wait_lost_replies(1, Duration::from_secs(1)).await);

    // The same through redis-rs: the pipeline fails as a whole.
    proxy.lose_reply(Match::command("INCR"), 1);
    let mut conn = through(&proxy).await;
    let result: redis::RedisResult<((), i64)> = redis::pipe()
        .cmd("SET")
        .arg("b")
        .arg("2")
        .cmd("INCR")
        .arg("k")
        .query_async(&mut conn)
        .await;
    assert!(result.is_err());
    assert_eq!(get(&mut redis, "b").await.as_deref(), Some("2"));
    assert_eq!(get(&mut redis, "k").await.as_deref(), Some("2"));
}

#[tokio::test]
async fn a_long_pipeline_loses_one_reply_and_everything_after() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    proxy.lose_reply(Match::command("INCR"), 500);
    let mut raw = Raw::connect(&proxy).await;
    let incr: &[&str] = &["INCR", "k"];
    raw.send(&[incr; 1000]).await;
    for n in 1..500 {
        assert_eq!(raw.expect_frame("INCR").await, format!(":{n}\r\n"));
    }
    assert_eq!(raw.frame().await, None, "the 500th reply is lost");
    assert!(raw.buf.is_empty());
    let ran: i64 = get(&mut direct(&server).await, "k")
        .await
        .expect("k is set")
        .parse()
        .expect("a number");
    assert!(ran >= 500, "the lost one ran too: {ran}");
}

#[tokio::test]
async fn delayed_replies() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    let mut conn = through(&proxy).await;
    proxy.delay_replies(Duration::from_millis(200));
    let started = Instant::now();
    ping(&mut conn).await.expect("PING");
    assert!(started.elapsed() >= Duration::from_millis(200));
    proxy.delay_replies(Duration::ZERO);
    let started = Instant::now();
    ping(&mut conn).await.expect("PING");
    assert!(started.elapsed() < Duration::from_millis(100));
}

#[tokio::test]
async fn black_holes_and_reset() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    let mut conn = through(&proxy).await;
    let short = Duration::from_millis(300);

    // Requests swallowed: nothing runs, nothing counted.
    proxy.black_hole(Direction::ToServer, true);
    let before = proxy.requests();
    assert!(
        tokio::time::timeout(short, incr(&mut conn, "k"))
            .await
            .is_err()
    );
    assert_eq!(proxy.requests(), before);
    assert_eq!(get(&mut direct(&server).await, "k").await, None);
    proxy.black_hole(Direction::ToServer, false);

    // Replies swallowed: the connection stays open but never answers.
    let mut conn = through(&proxy).await;
    proxy.black_hole(Direction::ToClient, true);
    assert!(
        tokio::time::timeout(short, get(&mut conn, "k"))
            .await
            .is_err()
    );
    let blocked = tokio::spawn({
        let mut conn = conn.clone();
        async move { ping(&mut conn).await }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!blocked.is_finished());
    proxy.black_hole(Direction::ToClient, false);
    proxy.reset();
    let result = tokio::time::timeout(Duration::from_secs(1), blocked)
        .await
        .expect("the reset ends the blocked PING")
        .expect("no panic");
    assert!(result.is_err(), "{result:?}");
    // Healed, and new connections are accepted.
    assert_eq!(
        ping(&mut through(&proxy).await).await.expect("PING"),
        "PONG"
    );
}

/// One chosen connection black-holed, a subscriber's: it hears no message, and every other
/// connection goes on; healed, it hears again. Requests black-holed on another connection alone
/// do not run.
#[tokio::test]
async fn a_black_hole_on_one_connection_leaves_the_others_alone() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    let mut publisher = direct(&server).await;
    let mut subscriber = Raw::connect(&proxy).await;
    subscriber.send(&[&["SUBSCRIBE", "ch"]]).await;
    assert!(
        subscriber
            .expect_frame("subscribed")
            .await
            .contains("subscribe")
    );
    let mut conn = through(&proxy).await;
    ping(&mut conn).await.expect("PING");
    let open = proxy.open_connections();
    let [listening, other] = open[..] else {
        panic!("two connections: {open:?}")
    };
    assert!(listening.subscribed && !other.subscribed, "{open:?}");
    assert_eq!(listening.requests, 1, "its SUBSCRIBE");
    let publish = async |publisher: &mut MultiplexedConnection, message: &str| {
        let receivers: i64 = redis::cmd("PUBLISH")
            .arg("ch")
            .arg(message)
            .query_async(publisher)
            .await
            .expect("PUBLISH");
        receivers
    };
    let short = Duration::from_millis(300);

    // Deaf: Redis still counts it as subscribed and sends, but nothing reaches it.
    assert!(proxy.black_hole_connection(listening.id, Direction::ToClient, true));
    assert_eq!(publish(&mut publisher, "unheard").await, 1);
    assert!(
        tokio::time::timeout(short, subscriber.frame())
            .await
            .is_err(),
        "the black-holed subscriber hears nothing"
    );
    assert_eq!(
        ping(&mut conn).await.expect("PING"),
        "PONG",
        "the other goes on"
    );
    assert!(proxy.black_hole_connection(listening.id, Direction::ToClient, false));
    assert_eq!(publish(&mut publisher, "heard").await, 1);
    assert!(
        subscriber
            .expect_frame("message")
            .await
            .ends_with("heard\r\n")
    );

    // Requests swallowed on the other connection alone: its INCR never runs.
    assert!(proxy.black_hole_connection(other.id, Direction::ToServer, true));
    assert!(
        tokio::time::timeout(short, incr(&mut conn, "k"))
            .await
            .is_err()
    );
    assert_eq!(get(&mut direct(&server).await, "k").await, None);
    assert_eq!(publish(&mut publisher, "still").await, 1);
    assert!(
        subscriber
            .expect_frame("message")
            .await
            .ends_with("still\r\n")
    );
    assert!(
        !proxy.black_hole_connection(u64::MAX, Direction::ToClient, true),
        "no such connection"
    );
}

#[tokio::test]
async fn refused_connections() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    proxy.refuse(true);
    let refused = async {
        let mut conn = connect(&proxy.url()).await?;
        ping(&mut conn).await
    };
    assert!(refused.await.is_err());
    assert!(proxy.connections() >= 1);
    proxy.refuse(false);
    assert_eq!(
        ping(&mut through(&proxy).await).await.expect("PING"),
        "PONG"
    );
}

#[tokio::test]
async fn dropping_the_proxy_closes_its_connections() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    let url = proxy.url();
    let mut conn = through(&proxy).await;
    ping(&mut conn).await.expect("PING");
    drop(proxy);
    assert!(ping(&mut conn).await.is_err());
    assert!(connect(&url).await.is_err(), "no longer listening");
}

#[tokio::test]
async fn resp3_pushes_are_not_replies() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    let mut publisher = direct(&server).await;
    proxy.lose_reply(Match::command("ECHO").with_arg("lost"), 1);
    let mut raw = Raw::connect(&proxy).await;
    raw.send(&[&["HELLO", "3"]]).await;
    assert!(raw.expect_frame("HELLO").await.starts_with('%'));
    raw.send(&[&["SUBSCRIBE", "ch"]]).await;
    assert!(raw.expect_frame("subscribed").await.starts_with(">3\r\n"));
    for message in ["m1", "m2"] {
        let _: i64 = redis::cmd("PUBLISH")
            .arg("ch")
            .arg(message)
            .query_async(&mut publisher)
            .await
            .expect("PUBLISH");
        let push = raw.expect_frame("message").await;
        assert!(push.starts_with(">3\r\n") && push.ends_with(&format!("{message}\r\n")));
    }
    raw.send(&[&["PING"], &["ECHO", "kept"]]).await;
    assert_eq!(raw.expect_frame("PING").await, "+PONG\r\n");
    assert_eq!(raw.expect_frame("ECHO kept").await, "$4\r\nkept\r\n");
    // A push arriving with the doomed request in flight still goes through; its reply does not.
    raw.send(&[&["PUBLISH", "ch", "m3"], &["ECHO", "lost"]])
        .await;
    let mut frames = [
        raw.expect_frame("PUBLISH").await,
        raw.expect_frame("PUBLISH").await,
    ];
    frames.sort();
    assert_eq!(frames[0], ":1\r\n");
    assert!(frames[1].starts_with(">3\r\n") && frames[1].ends_with("m3\r\n"));
    assert_eq!(raw.frame().await, None, "ECHO lost's reply is lost");
    assert!(raw.buf.is_empty());
    assert!(proxy.wait_lost_replies(1, Duration::from_secs(1)).await);
}

#[tokio::test]
async fn resp2_pubsub_messages_are_not_replies() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    let mut publisher = direct(&server).await;
    proxy.lose_reply(Match::command("PING").with_arg("b"), 1);
    let mut raw = Raw::connect(&proxy).await;
    raw.send(&[&["SUBSCRIBE", "ch", "other"]]).await;
    for channel in ["ch", "other"] {
        let confirmation = raw.expect_frame("subscribed").await;
        assert!(confirmation.contains("subscribe") && confirmation.contains(channel));
    }
    let _: i64 = redis::cmd("PUBLISH")
        .arg("ch")
        .arg("m1")
        .query_async(&mut publisher)
        .await
        .expect("PUBLISH");
    assert!(raw.expect_frame("message").await.ends_with("m1\r\n"));
    raw.send(&[&["PING", "a"]]).await;
    assert_eq!(
        raw.expect_frame("PING a").await,
        "*2\r\n$4\r\npong\r\n$1\r\na\r\n"
    );
    raw.send(&[&["PING", "b"]]).await;
    assert_eq!(raw.frame().await, None, "PING b's reply is lost");
    assert!(proxy.wait_lost_replies(1, Duration::from_secs(1)).await);
}
