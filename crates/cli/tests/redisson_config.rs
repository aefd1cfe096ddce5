//! `--redisson-config FILE`: the `rlock` binary reaches the server a Redisson YAML file names, with
//! its lock settings, and options on the command line take precedence over the file.

mod support;

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::Stdio;

use redis::Commands;
use rlock_tests::RedisServer;
use support::{assert_fails_cleanly, json_lines, rlock, run, run_ok};

/// A Redisson config for the server at `port`, in the shape Redisson's docs show, whose watchdog
/// timeout is 4 s (rlock's default is 30 s).
fn redisson_yaml(dir: &Path, port: u16) -> PathBuf {
    let path = dir.join("redisson.yaml");
    let yaml = format!(
        r#"
singleServerConfig:
  idleConnectionTimeout: 10000
  connectTimeout: 10000
  timeout: 3000
  retryAttempts: 3
  retryInterval: 1500
  password: null
  subscriptionsPerConnection: 5
  clientName: null
  address: "redis://127.0.0.1:{port}"
  connectionMinimumIdleSize: 24
  connectionPoolSize: 64
  database: 0
threads: 16
nettyThreads: 32
codec: !<org.redisson.codec.Kryo5Codec> {{}}
transportMode: "NIO"
lockWatchdogTimeout: 4000
"#
    );
    std::fs::write(&path, yaml).expect("write the Redisson config");
    path
}

/// Runs `rlock OPTIONS lock NAME --hold-ms 1500` (no URL in its environment) and returns the lock
/// key's PTTL, read on `server` while the command holds the lock.
fn pttl_while_held(server: &RedisServer, options: &[&str], name: &str) -> i64 {
    let mut args: Vec<&str> = options.to_vec();
    args.extend(["lock", name, "--hold-ms", "1500"]);
    let mut child = rlock(None, &args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn rlock lock");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut acquired = String::new();
    stdout.read_line(&mut acquired).expect("read stdout");
    let pttl: i64 = if acquired.contains("\"acquired\"") {
        let mut redis = server.client().get_connection().expect("raw connection");
        redis.pttl(name).expect("PTTL")
    } else {
        -3
    };
    // What the command prints after `acquired`, up to its exit.
    let mut rest = Vec::new();
    stdout.read_to_end(&mut rest).expect("read stdout");
    let mut output = child.wait_with_output().expect("wait for rlock lock");
    output.stdout = rest;
    assert!(
        output.status.success(),
        "rlock {args:?} failed after {acquired:?}: {output:?}"
    );
    let rest = json_lines(&output);
    assert_eq!(rest.len(), 1, "{rest:?}");
    assert_eq!(rest[0]["event"], "released");
    pttl
}

#[test]
fn the_file_names_the_server_and_its_watchdog_timeout() {
    let server = RedisServer::start();
    let dir = tempfile::tempdir().expect("temporary directory");
    let file = redisson_yaml(dir.path(), server.port());
    let file = file.to_str().expect("UTF-8 path");

    let pttl = pttl_while_held(&server, &["--redisson-config", file], "yaml:file");
    assert!(0 < pttl && pttl <= 4000, "PTTL {pttl}");
    let shown = run_ok(None, &["--redisson-config", file, "inspect", "yaml:file"]);
    assert_eq!(shown.len(), 1, "{shown:?}");
    assert_eq!(shown[0]["exists"], false, "released: {shown:?}");

    // The command line beats the file.
    let options = ["--redisson-config", file, "--watchdog-ms", "2000"];
    let pttl = pttl_while_held(&server, &options, "yaml:flag");
    assert!(0 < pttl && pttl <= 2000, "PTTL {pttl}");
}

#[test]
fn a_url_on_the_command_line_beats_the_files_address_but_keeps_its_settings() {
    let server = RedisServer::start();
    let dir = tempfile::tempdir().expect("temporary directory");
    // The file names a server that is not there (a port just freed).
    let unused_port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port();
    let file = redisson_yaml(dir.path(), unused_port);
    let file = file.to_str().expect("UTF-8 path");
    let url = server.url();

    let options = ["--redisson-config", file, "--url", &url];
    let pttl = pttl_while_held(&server, &options, "yaml:url");
    assert!(0 < pttl && pttl <= 4000, "PTTL {pttl}");
}

#[test]
fn a_bad_file_fails_cleanly_naming_the_key() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let file = dir.path().join("bad.yaml");
    std::fs::write(
        &file,
        "clusterServersConfig:\n  nodeAddresses: [\"redis://127.0.0.1:7000\", \"tcp://x:1\"]\n",
    )
    .expect("write");
    let file = file.to_str().expect("UTF-8 path");
    let output = run(None, &["--redisson-config", file, "inspect", "x"]);
    assert_fails_cleanly(&output, "a bad address");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("clusterServersConfig.nodeAddresses[1]"),
        "{stderr}"
    );

    let output = run(
        None,
        &[
            "--redisson-config",
            "/nonexistent/redisson.yaml",
            "inspect",
            "x",
        ],
    );
    assert_fails_cleanly(&output, "a missing file");
}

/// A Redisson 4.x file for the server at `port` as 4.x's docs show it: `top` (the credentials, at
/// the top level where 4.x keeps them) and a `retryDelay` object.
fn redisson_4x_yaml(dir: &Path, port: u16, top: &str) -> PathBuf {
    let path = dir.join("redisson-4.yaml");
    let yaml = format!(
        r#"singleServerConfig:
  address: "redis://127.0.0.1:{port}"
  timeout: 3000
  retryAttempts: 4
  retryDelay: !<org.redisson.config.EqualJitterDelay> {{baseDelay: PT1S, maxDelay: PT2S}}
  reconnectionDelay: !<org.redisson.config.EqualJitterDelay> {{baseDelay: PT0.1S, maxDelay: PT10S}}
  database: 0
{top}threads: 16
nettyThreads: 32
codec: !<org.redisson.codec.Kryo5Codec> {{}}
transportMode: "NIO"
nameMapper: !<org.redisson.api.DefaultNameMapper> {{}}
lockWatchdogTimeout: 4000
"#
    );
    std::fs::write(&path, yaml).expect("write the Redisson config");
    path
}

/// Runs `rlock --redisson-config FILE check` and asserts that it succeeds without a warning about
/// the file.
fn check_succeeds(file: &Path, name: &str) {
    let file = file.to_str().expect("UTF-8 path");
    let args = [
        "--redisson-config",
        file,
        "check",
        name,
        "--tasks",
        "2",
        "--iterations",
        "10",
    ];
    let output = run(None, &args);
    assert!(output.status.success(), "rlock {args:?}: {output:?}");
    let report = json_lines(&output);
    assert_eq!(report.len(), 1, "{report:?}");
    assert_eq!(report[0]["counter"], 20, "{report:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("Redisson config"), "{stderr}");
}

#[test]
fn check_runs_on_a_password_protected_server_from_a_4x_file() {
    let password = "s3cret:pw";
    let server = RedisServer::start_authenticated(None, password, &["--requirepass", password]);
    let dir = tempfile::tempdir().expect("temporary directory");
    let top = format!("password: \"{password}\"\nusername: null\n");
    check_succeeds(
        &redisson_4x_yaml(dir.path(), server.port(), &top),
        "yaml:check",
    );
}

#[test]
fn check_runs_as_an_acl_user_from_a_4x_file() {
    let server = RedisServer::start_acl_user("locker", "locker-pw");
    let dir = tempfile::tempdir().expect("temporary directory");
    let top = "username: \"locker\"\npassword: \"locker-pw\"\n";
    check_succeeds(
        &redisson_4x_yaml(dir.path(), server.port(), top),
        "yaml:acl",
    );
}

#[test]
fn a_custom_name_mapper_is_refused_before_anything_is_written() {
    let server = RedisServer::start();
    let dir = tempfile::tempdir().expect("temporary directory");
    let file = redisson_4x_yaml(dir.path(), server.port(), "")
        .to_str()
        .map(str::to_owned);
    let file = file.expect("UTF-8 path");
    let yaml = std::fs::read_to_string(&file).expect("read the file back");
    let mapped = yaml.replace(
        "nameMapper: !<org.redisson.api.DefaultNameMapper> {}",
        "nameMapper: !<com.example.PrefixMapper> {prefix: \"app:\"}",
    );
    assert_ne!(mapped, yaml);
    std::fs::write(&file, mapped).expect("write the Redisson config");

    for args in [
        vec!["check", "yaml:mapped", "--tasks", "2", "--iterations", "10"],
        vec!["lock", "yaml:mapped", "--hold-ms", "100"],
    ] {
        let mut all = vec!["--redisson-config", file.as_str()];
        all.extend(args);
        let output = run(None, &all);
        assert_fails_cleanly(&output, "a custom nameMapper");
        let stderr = String::from_utf8_lossy(&output.stderr);
        for part in [
            "nameMapper: class com.example.PrefixMapper refused",
            "would not exclude each other",
            "--name-prefix",
        ] {
            assert!(stderr.contains(part), "{part}: {stderr}");
        }
    }
    let mut redis = server.client().get_connection().expect("raw connection");
    let keys: u64 = redis::cmd("DBSIZE").query(&mut redis).expect("DBSIZE");
    assert_eq!(keys, 0, "the refused file's commands wrote to Redis");
}
