//! Authentication (password, ACL user) and TLS, for commands and for the subscriber connection; and
//! secrets never show up in what rlock prints.

use std::net::TcpListener;
use std::time::Duration;

use rlock_redisson::{Client, Config, Error};
use rlock_tests::RedisServer;
use rlock_tests::harness::{acquired_after, spawn_waiter};
use tokio::time::Instant;

/// Locks with `holder`, parks a waiter of `waiter` on it, unlocks, and asserts the waiter was woken by
/// the unlock message (over the subscriber connection), not by the 30 s PTTL.
async fn wakes_over_pubsub(holder: &Client, waiter: &Client, name: &str) {
    let guard = holder.lock(name).lock().await.expect("holder locks");
    let waiting = spawn_waiter(waiter.lock(name));
    tokio::time::sleep(Duration::from_millis(300)).await;
    guard.unlock().await.expect("holder unlocks");
    let (after, guard) = acquired_after(waiting, Instant::now(), Duration::from_secs(5)).await;
    assert!(
        after < Duration::from_secs(1),
        "woken {after:?} after the unlock"
    );
    guard.unlock().await.expect("unlock");
}

#[tokio::test]
async fn password_authentication_for_commands_and_subscriber() {
    let server =
        RedisServer::start_authenticated(None, "s3cret-pw", &["--requirepass", "s3cret-pw"]);
    let url = server.url();
    let holder = Client::connect(url.as_str())
        .await
        .expect("authenticated client");
    let waiter = Client::connect(url.as_str())
        .await
        .expect("authenticated client");
    wakes_over_pubsub(&holder, &waiter, "secure:password").await;

    for shown in [format!("{holder:?}"), format!("{:?}", holder.config())] {
        assert!(!shown.contains("s3cret-pw"), "the password leaked: {shown}");
    }
    let wrong = format!("redis://:wrong@127.0.0.1:{}/", server.port());
    match Client::connect(wrong).await {
        Err(e @ Error::Backend { .. }) => assert!(!e.to_string().contains("wrong@")),
        other => panic!("expected an authentication error, got {other:?}"),
    }
    let anonymous = format!("redis://127.0.0.1:{}/", server.port());
    assert!(Client::connect(anonymous).await.is_err());
}

#[tokio::test]
async fn acl_user_authentication() {
    let server = RedisServer::start_authenticated(
        Some("locker"),
        "locker-pw",
        &[
            "--user",
            "locker",
            "on",
            ">locker-pw",
            "~*",
            "&*",
            "+@all",
            "--user",
            "default",
            "off",
        ],
    );
    let url = server.url();
    let holder = Client::connect(url.as_str())
        .await
        .expect("ACL user client");
    let waiter = Client::connect(url.as_str())
        .await
        .expect("ACL user client");
    wakes_over_pubsub(&holder, &waiter, "secure:acl").await;
    assert!(!format!("{holder:?}").contains("locker-pw"));
    let other_user = format!("redis://nobody:locker-pw@127.0.0.1:{}/", server.port());
    assert!(Client::connect(other_user).await.is_err());
}

/// A CA and a server certificate for 127.0.0.1, as PEM: (ca, cert, key).
fn certificates() -> (String, String, String) {
    let ca_key = rcgen::KeyPair::generate().expect("CA key");
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "rlock test CA");
    let ca = ca_params.self_signed(&ca_key).expect("CA certificate");
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let key = rcgen::KeyPair::generate().expect("server key");
    let params =
        rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
            .expect("server params");
    let cert = params.signed_by(&key, &issuer).expect("server certificate");
    (ca.pem(), cert.pem(), key.serialize_pem())
}

#[tokio::test]
async fn tls_for_commands_and_subscriber() {
    let (ca, cert, key) = certificates();
    let dir = tempfile::tempdir().expect("temp dir");
    let path = |name: &str, pem: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, pem).expect("write pem");
        path.to_string_lossy().into_owned()
    };
    let (ca_file, cert_file, key_file) = (
        path("ca.pem", &ca),
        path("cert.pem", &cert),
        path("key.pem", &key),
    );
    let tls_port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port()
        .to_string();
    let server = RedisServer::start_with(&[
        "--tls-port",
        &tls_port,
        "--tls-cert-file",
        &cert_file,
        "--tls-key-file",
        &key_file,
        "--tls-ca-cert-file",
        &ca_file,
        "--tls-auth-clients",
        "no",
    ]);
    let url = format!("rediss://127.0.0.1:{tls_port}/");
    let mut config = Config::new(url.as_str());
    config.tls_root_cert = Some(ca.clone().into_bytes());
    let holder = Client::with_config(config.clone())
        .await
        .expect("TLS client");
    let waiter = Client::with_config(config).await.expect("TLS client");
    wakes_over_pubsub(&holder, &waiter, "secure:tls").await;

    // Every connection of the two clients (pool and subscriber) came in on the TLS port.
    let mut plain = server
        .client()
        .get_multiplexed_async_connection()
        .await
        .expect("plain connection");
    let clients: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query_async(&mut plain)
        .await
        .expect("CLIENT LIST");
    let ports: Vec<&str> = clients
        .lines()
        .filter_map(|line| {
            line.split(' ')
                .find_map(|kv| kv.strip_prefix("laddr=127.0.0.1:"))
        })
        .collect();
    let over_tls = ports.iter().filter(|port| **port == tls_port).count();
    assert_eq!(
        ports.len() - over_tls,
        1,
        "only this inspecting connection is plain: {clients}"
    );
    assert!(
        over_tls >= 4,
        "commands and subscribers of both clients use TLS: {clients}"
    );
    assert!(
        clients.contains("cmd=subscribe") || clients.contains("cmd=unsubscribe"),
        "the subscriber connection is among them: {clients}"
    );

    // Without trusting the CA, the certificate is refused: a typed error, no panic.
    let untrusted = Client::connect(url.as_str()).await;
    assert!(
        matches!(
            untrusted,
            Err(Error::Backend { .. } | Error::Timeout { .. })
        ),
        "{untrusted:?}"
    );
    // `#insecure` skips verification (for throwaway setups only).
    let insecure = Client::connect(format!("{url}#insecure"))
        .await
        .expect("insecure TLS client");
    let guard = insecure
        .lock("secure:tls")
        .lock()
        .await
        .expect("lock over insecure TLS");
    guard.unlock().await.expect("unlock");
}
