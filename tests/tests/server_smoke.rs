//! Smoke tests for the test-support `RedisServer` itself.

use std::process::Command;
use std::time::Duration;

use rlock_tests::RedisServer;

/// Whether a process with this pid exists (`kill -0`).
fn process_exists(pid: u32) -> bool {
    Command::new("kill")
        .args(["-0", &pid.to_string()])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

#[tokio::test]
async fn server_answers_ping_and_is_gone_after_drop() {
    let server = RedisServer::start();
    assert_eq!(
        server.url(),
        format!("redis://127.0.0.1:{}/", server.port())
    );

    let mut con = server
        .client()
        .get_multiplexed_async_connection()
        .await
        .expect("connect to the test server");
    let pong: String = redis::cmd("PING")
        .query_async(&mut con)
        .await
        .expect("PING the test server");
    assert_eq!(pong, "PONG");

    let pid = server.pid();
    let dir = server.dir().to_path_buf();
    assert!(process_exists(pid));
    drop(server);
    assert!(!process_exists(pid), "redis-server {pid} survived the drop");
    assert!(!dir.exists(), "{} survived the drop", dir.display());
}

#[test]
fn restart_keeps_aof_data_and_pause_freezes_the_server() {
    let mut server = RedisServer::start_with(&["--appendonly", "yes"]);
    let client = server.client();
    let mut con = client.get_connection().expect("connect");
    redis::cmd("SET")
        .arg("k")
        .arg("v")
        .exec(&mut con)
        .expect("SET");

    let (port, old_pid) = (server.port(), server.pid());
    server.restart();
    assert_eq!(server.port(), port);
    assert_ne!(server.pid(), old_pid);
    let mut con = client.get_connection().expect("reconnect");
    let value: Option<String> = redis::cmd("GET").arg("k").query(&mut con).expect("GET");
    assert_eq!(value.as_deref(), Some("v"));

    server.pause();
    con.set_read_timeout(Some(Duration::from_millis(300)))
        .expect("set read timeout");
    assert!(
        redis::cmd("PING").query::<String>(&mut con).is_err(),
        "a paused server answered"
    );
    server.resume();
    let mut con = client.get_connection().expect("connect after resume");
    let pong: String = redis::cmd("PING").query(&mut con).expect("PING");
    assert_eq!(pong, "PONG");
}
