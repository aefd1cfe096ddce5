//! `Config::from_redisson_yaml`: Redisson's own YAML files, written the way its docs show them (tags,
//! nulls, thread counts and all), load into the configuration the constructors make.

use std::collections::HashMap;
use std::time::Duration;

use rlock_redisson::{Config, Error, ShardedPubSub, Topology};
use rlock_tests::RedisServer;
use rlock_tests::harness::raw;
use rlock_tests::logs::Captured;

fn load(yaml: &str) -> Config {
    Config::from_redisson_yaml(yaml).expect("a valid Redisson config")
}

#[test]
fn single_server() {
    let config = load(
        r#"
singleServerConfig:
  idleConnectionTimeout: 10000
  connectTimeout: 5000
  timeout: 2000
  retryAttempts: 3
  retryInterval: 1500
  password: "s3cret"
  username: null
  subscriptionsPerConnection: 5
  clientName: null
  address: "redis://127.0.0.1:6379"
  subscriptionConnectionMinimumIdleSize: 1
  subscriptionConnectionPoolSize: 50
  connectionMinimumIdleSize: 24
  connectionPoolSize: 64
  database: 3
  dnsMonitoringInterval: 5000
threads: 16
nettyThreads: 32
codec: !<org.redisson.codec.Kryo5Codec> {}
transportMode: "NIO"
lockWatchdogTimeout: 20000
"#,
    );
    let mut expected = Config::new("redis://:s3cret@127.0.0.1:6379/3");
    expected.connect_timeout = Duration::from_secs(5);
    expected.command_timeout = Duration::from_secs(2);
    expected.retry_attempts = 3;
    expected.retry_delay = Duration::from_millis(1500);
    expected.retry_max_delay = Duration::from_millis(1500);
    expected.watchdog_timeout = Duration::from_secs(20);
    assert_eq!(config, expected);
}

#[test]
fn cluster() {
    let config = load(
        r#"
clusterServersConfig:
  idleConnectionTimeout: 10000
  connectTimeout: 10000
  timeout: 3000
  retryAttempts: 3
  retryInterval: 1500
  failedSlaveReconnectionInterval: 3000
  failedSlaveNodeDetector: !<org.redisson.client.FailedConnectionDetector> {}
  password: null
  subscriptionsPerConnection: 5
  clientName: null
  loadBalancer: !<org.redisson.connection.balancer.RoundRobinLoadBalancer> {}
  subscriptionConnectionMinimumIdleSize: 1
  subscriptionConnectionPoolSize: 50
  slaveConnectionMinimumIdleSize: 24
  slaveConnectionPoolSize: 64
  masterConnectionMinimumIdleSize: 24
  masterConnectionPoolSize: 64
  readMode: "SLAVE"
  subscriptionMode: "SLAVE"
  nodeAddresses:
  - "redis://127.0.0.1:7004"
  - "redis://127.0.0.1:7001"
  - "redis://127.0.0.1:7000"
  scanInterval: 1000
  pingConnectionInterval: 30000
  keepAlive: false
  tcpNoDelay: true
  shardedSubscriptionMode: "OFF"
  natMapper: !<org.redisson.api.HostPortNatMapper>
    hostsPortMap:
      "172.18.0.2:7000": "127.0.0.1:7000"
threads: 16
nettyThreads: 32
codec: !<org.redisson.codec.Kryo5Codec> {}
transportMode: "NIO"
checkLockSyncedSlaves: false
slavesSyncTimeout: 2500
"#,
    );
    let mut expected = Config::cluster([
        "redis://127.0.0.1:7004/",
        "redis://127.0.0.1:7001/",
        "redis://127.0.0.1:7000/",
    ]);
    expected.retry_attempts = 3;
    expected.retry_delay = Duration::from_millis(1500);
    expected.retry_max_delay = Duration::from_millis(1500);
    expected.sharded_pubsub = ShardedPubSub::Off;
    expected.nat_map = HashMap::from([("172.18.0.2:7000".into(), "127.0.0.1:7000".into())]);
    expected.check_lock_synced_replicas = false;
    expected.replicas_sync_timeout = Duration::from_millis(2500);
    assert_eq!(config, expected);
}

#[test]
fn sentinel() {
    let config = load(
        r#"
sentinelServersConfig:
  idleConnectionTimeout: 10000
  connectTimeout: 10000
  timeout: 3000
  retryAttempts: 4
  subscriptionTimeout: 5000
  username: "app"
  password: "master pw"
  sentinelUsername: null
  sentinelPassword: "sentinel:pw"
  subscriptionsPerConnection: 5
  clientName: null
  loadBalancer: !<org.redisson.connection.balancer.RoundRobinLoadBalancer> {}
  readMode: "SLAVE"
  subscriptionMode: "SLAVE"
  sentinelAddresses:
  - "redis://127.0.0.1:26379"
  - "redis://127.0.0.1:26389"
  masterName: "mymaster"
  database: 0
  checkSentinelsList: true
threads: 16
nettyThreads: 32
codec: !<org.redisson.codec.Kryo5Codec> {}
transportMode: "NIO"
"#,
    );
    let mut expected = Config::sentinel(
        "mymaster",
        [
            "redis://:sentinel%3Apw@127.0.0.1:26379/",
            "redis://:sentinel%3Apw@127.0.0.1:26389/",
        ],
    );
    expected.topology = Topology::Sentinel {
        master_name: "mymaster".into(),
        username: Some("app".into()),
        password: Some("master pw".into()),
    };
    expected.subscription_timeout = Duration::from_secs(5);
    assert_eq!(config, expected);
}

#[test]
fn master_slave_with_environment_placeholders() {
    // Unset in the test's environment (a name no one uses): the default applies.
    let config = load(
        r#"
masterSlaveServersConfig:
  masterAddress: "rediss://redis.example.com:${RLOCK_TEST_UNSET_PORT_8c1f:-6380}"
  slaveAddresses:
  - "rediss://replica-1.example.com:6380"
  - "rediss://replica-2.example.com:6380"
  database: 1
  readMode: "MASTER"
  password: null
codec: !<org.redisson.codec.JsonJacksonCodec> {}
lockWatchdogTimeout: 12000
"#,
    );
    let mut expected = Config::master_replica("rediss://redis.example.com:6380/1");
    expected.watchdog_timeout = Duration::from_secs(12);
    // The codec names the objects of map entries (docs/protocol.md §13).
    expected.codec = rlock_redisson::Codec::JsonJackson;
    assert_eq!(config, expected);
}

#[test]
fn unknown_keys_are_warned_about_and_redisson_only_ones_are_not() {
    let captured = Captured::default();
    let config = {
        let _capturing = captured.install();
        load(
            r#"
singleServerConfig:
  address: "redis://127.0.0.1:6379"
  connectionPoolSize: 64
  colour: "blue"
lockWatchdogTimout: 5000
threads: 16
codec: !<org.redisson.codec.Kryo5Codec> {}
"#,
        )
    };
    assert_eq!(config, Config::new("redis://127.0.0.1:6379/"));
    let logs = captured.text();
    let warnings: Vec<&str> = logs.lines().filter(|line| line.contains("WARN")).collect();
    assert_eq!(warnings.len(), 2, "{logs}");
    assert!(logs.contains("singleServerConfig.colour"), "{logs}");
    assert!(logs.contains("lockWatchdogTimout"), "{logs}");
    for quiet in ["connectionPoolSize", "threads", "codec"] {
        assert!(!logs.contains(quiet), "{quiet} warned about: {logs}");
    }
}

#[test]
fn bad_values_are_errors_naming_the_key() {
    let error = Config::from_redisson_yaml(
        r#"
clusterServersConfig:
  nodeAddresses:
  - "redis://127.0.0.1:7000"
  - "127.0.0.1:7001"
"#,
    )
    .expect_err("an address without a scheme");
    let Error::InvalidArgument(message) = error else {
        panic!("not an invalid argument: {error:?}");
    };
    assert!(
        message.starts_with("clusterServersConfig.nodeAddresses[1]: "),
        "{message}"
    );

    let error = Config::from_redisson_yaml(
        "singleServerConfig:\n  address: \"redis://127.0.0.1:6379\"\nlockWatchdogTimeout: \"long\"\n",
    )
    .expect_err("a watchdog timeout that is not a number");
    assert!(error.to_string().contains("lockWatchdogTimeout"), "{error}");
}

/// Locks `name` with a client of `config` and returns the PTTL that `server` (the lock's master)
/// shows for it while held.
async fn pttl_while_held(config: Config, name: &str, server: &RedisServer) -> i64 {
    let client = rlock_redisson::Client::with_config(config)
        .await
        .expect("a client of the file's config connects");
    let guard = client.lock(name).lock().await.expect("lock acquired");
    let pttl: i64 = redis::cmd("PTTL")
        .arg(name)
        .query_async(&mut raw(server).await)
        .await
        .expect("PTTL");
    guard.unlock().await.expect("unlocked");
    pttl
}

/// `urls` as Redisson writes addresses: a YAML list of `redis://host:port`.
fn address_list(urls: &[String]) -> String {
    let quoted = urls
        .iter()
        .map(|url| format!("\"{}\"", url.trim_end_matches('/')));
    format!("[{}]", quoted.collect::<Vec<_>>().join(", "))
}

#[tokio::test]
async fn a_client_of_the_file_logs_in_and_leases_locks_for_its_watchdog_timeout() {
    let password = "s3cret:pw";
    let server = RedisServer::start_authenticated(None, password, &["--requirepass", password]);
    let yaml = format!(
        r#"
singleServerConfig:
  address: "redis://127.0.0.1:{port}"
  password: "{password}"
  clientName: null
threads: 16
codec: !<org.redisson.codec.Kryo5Codec> {{}}
lockWatchdogTimeout: 3000
"#,
        port = server.port()
    );
    let pttl = pttl_while_held(load(&yaml), "yaml:leased", &server).await;
    assert!(0 < pttl && pttl <= 3000, "PTTL {pttl}");
}

#[tokio::test]
async fn a_cluster_from_its_file_takes_locks() {
    let cluster = rlock_tests::topology::Cluster::start(3, 0);
    let yaml = format!(
        "clusterServersConfig:\n  nodeAddresses: {}\n  shardedSubscriptionMode: \"AUTO\"\n  \
         readMode: \"MASTER\"\nlockWatchdogTimeout: 3000\ncodec: !<org.redisson.codec.Kryo5Codec> {{}}\n",
        address_list(&cluster.seeds())
    );
    let config = load(&yaml);
    let mut expected = cluster.config();
    expected.watchdog_timeout = Duration::from_secs(3);
    assert_eq!(config, expected);
    let name = "yaml:{cluster}";
    let pttl = pttl_while_held(config, name, cluster.master_of(name)).await;
    assert!(0 < pttl && pttl <= 3000, "PTTL {pttl}");
}

#[tokio::test]
async fn a_sentinel_master_from_its_file_takes_locks() {
    let setup = rlock_tests::topology::SentinelSetup::start(1, 1);
    let yaml = format!(
        "sentinelServersConfig:\n  sentinelAddresses: {}\n  masterName: \"{}\"\n  \
         password: null\n  sentinelPassword: null\n  checkSentinelsList: false\n  database: 0\n\
         lockWatchdogTimeout: 3000\ncheckLockSyncedSlaves: true\n",
        address_list(&setup.sentinel_urls()),
        rlock_tests::topology::SentinelSetup::MASTER_NAME
    );
    let config = load(&yaml);
    let mut expected = setup.config();
    expected.watchdog_timeout = Duration::from_secs(3);
    assert_eq!(config, expected);
    let pttl = pttl_while_held(config, "yaml:sentinel", &setup.master).await;
    assert!(0 < pttl && pttl <= 3000, "PTTL {pttl}");
}

/// The keys every server section of a Redisson 4.7 file has (`BaseConfig`), as `Config.toYAML()`
/// writes them with the defaults: the credentials, TLS and mapper keys that 4.x moved to the top
/// level are still written here, as null or as the defaults.
const BASE_CONFIG_4_7: &str = r#"  idleConnectionTimeout: 10000
  connectTimeout: 10000
  timeout: 3000
  subscriptionTimeout: 7500
  retryAttempts: 4
  retryInterval: 1500
  retryDelay: !<org.redisson.config.EqualJitterDelay> {baseDelay: PT1S, maxDelay: PT2S}
  reconnectionDelay: !<org.redisson.config.EqualJitterDelay> {baseDelay: PT0.1S, maxDelay: PT10S}
  password: null
  username: null
  credentialsResolver: !<org.redisson.client.DefaultCredentialsResolver> {}
  subscriptionsPerConnection: 5
  clientName: null
  sslVerificationMode: "STRICT"
  sslKeystoreType: null
  sslProvider: "JDK"
  sslTruststore: null
  sslTruststorePassword: null
  sslKeystore: null
  sslKeystorePassword: null
  sslProtocols: null
  sslCiphers: null
  sslTrustManagerFactory: null
  sslKeyManagerFactory: null
  pingConnectionInterval: 30000
  keepAlive: false
  tcpKeepAliveCount: 0
  tcpKeepAliveIdle: 0
  tcpKeepAliveInterval: 0
  tcpUserTimeout: 0
  tcpNoDelay: true
  nameMapper: !<org.redisson.api.DefaultNameMapper> {}
  commandMapper: !<org.redisson.config.DefaultCommandMapper> {}
"#;

/// The keys of `BaseMasterSlaveServersConfig` (cluster, sentinel and master/slave sections).
const MASTER_SLAVE_4_7: &str = r#"  loadBalancer: !<org.redisson.connection.balancer.RoundRobinLoadBalancer> {}
  slaveConnectionMinimumIdleSize: 24
  slaveConnectionPoolSize: 64
  failedSlaveReconnectionInterval: 3000
  failedSlaveCheckInterval: 180000
  failedSlaveNodeDetector: !<org.redisson.client.FailedConnectionDetector> {checkInterval: 180000}
  masterConnectionMinimumIdleSize: 24
  masterConnectionPoolSize: 64
  readMode: "SLAVE"
  fallbackLoadingToMaster: true
  subscriptionMode: "MASTER"
  subscriptionConnectionMinimumIdleSize: 1
  subscriptionConnectionPoolSize: 50
  dnsMonitoringInterval: 5000
  dnsMonitoringTimes: 1
"#;

/// Every top-level key of `org.redisson.config.Config` in 4.7, as `toYAML()` writes them, with the
/// credentials set at the top level, where 4.x keeps them.
const TOP_LEVEL_4_7: &str = r#"password: "s3cret pw"
username: null
credentialsResolver: !<org.redisson.client.DefaultCredentialsResolver> {}
threads: 16
nettyThreads: 32
nettyExecutor: null
codec: !<org.redisson.codec.Kryo5Codec> {}
executor: null
referenceEnabled: true
transportMode: "NIO"
eventLoopGroup: null
lockWatchdogTimeout: 30000
lockWatchdogBatchSize: 100
fairLockWaitTimeout: 300000
checkLockSyncedSlaves: true
slavesSyncTimeout: 1000
reliableTopicWatchdogTimeout: 600000
keepPubSubOrder: true
useScriptCache: true
minCleanUpDelay: 5
maxCleanUpDelay: 1800
cleanUpKeysAmount: 100
nettyHook: !<org.redisson.client.DefaultNettyHook> {}
connectionListener: null
useThreadClassLoader: true
addressResolverGroupFactory: !<org.redisson.connection.SequentialDnsAddressResolverFactory> {}
lazyInitialization: false
protocol: "RESP2"
valkeyCapabilities: []
nameMapper: !<org.redisson.api.DefaultNameMapper> {}
commandMapper: !<org.redisson.config.DefaultCommandMapper> {}
sslVerificationMode: "STRICT"
sslKeystoreType: null
sslProvider: "JDK"
sslTruststore: null
sslTruststorePassword: null
sslKeystore: null
sslKeystorePassword: null
sslProtocols: null
sslCiphers: null
sslTrustManagerFactory: null
sslKeyManagerFactory: null
tcpKeepAlive: false
tcpKeepAliveCount: 0
tcpKeepAliveIdle: 0
tcpKeepAliveInterval: 0
tcpUserTimeout: 0
tcpNoDelay: true
"#;

/// A Redisson 4.7 file: `section` (its name and topology-specific keys, after the shared ones of
/// `BaseConfig`, and `BaseMasterSlaveServersConfig`'s where `master_slave`), then the top level.
fn redisson_4_7(section: &str, specific: &str, master_slave: bool) -> String {
    let master_slave = if master_slave { MASTER_SLAVE_4_7 } else { "" };
    format!("---\n{section}:\n{BASE_CONFIG_4_7}{master_slave}{specific}{TOP_LEVEL_4_7}")
}

fn single_server_4_7(port: u16) -> String {
    redisson_4_7(
        "singleServerConfig",
        &format!(
            r#"  address: "redis://127.0.0.1:{port}"
  subscriptionConnectionMinimumIdleSize: 1
  subscriptionConnectionPoolSize: 50
  connectionMinimumIdleSize: 24
  connectionPoolSize: 64
  database: 0
  dnsMonitoringInterval: 5000
"#
        ),
        false,
    )
}

/// `yaml`'s configuration, and the lines it logged.
fn load_logged(yaml: &str) -> (Result<Config, Error>, String) {
    let captured = Captured::default();
    let config = {
        let _capturing = captured.install();
        Config::from_redisson_yaml(yaml)
    };
    (config, captured.text())
}

/// The warnings in `logs`, without their time stamps and targets.
fn warnings(logs: &str) -> Vec<&str> {
    logs.lines()
        .filter(|line| line.contains("WARN"))
        .map(|line| {
            line.split_once("Redisson config: ")
                .map_or(line, |(_, text)| text)
        })
        .collect()
}

#[test]
fn a_redisson_4_7_file_loads_without_unknown_keys() {
    let mut expected = Config::new("redis://:s3cret%20pw@127.0.0.1:6379/");
    // retryDelay's EqualJitterDelay(1 s, 2 s) is rlock's own retry model, and wins over the
    // deprecated retryInterval that toYAML also writes.
    expected.retry_delay = Duration::from_secs(1);
    expected.retry_max_delay = Duration::from_secs(2);
    let cases = [
        (single_server_4_7(6379), expected, vec![]),
        (
            redisson_4_7(
                "clusterServersConfig",
                r#"  nodeAddresses:
  - "redis://127.0.0.1:7000"
  - "redis://127.0.0.1:7001"
  scanInterval: 5000
  checkSlotsCoverage: true
  natMapper: !<org.redisson.api.DefaultNatMapper> {}
  shardedSubscriptionMode: "AUTO"
"#,
                true,
            ),
            {
                let mut expected = Config::cluster([
                    "redis://:s3cret%20pw@127.0.0.1:7000/",
                    "redis://:s3cret%20pw@127.0.0.1:7001/",
                ]);
                expected.retry_delay = Duration::from_secs(1);
                expected.retry_max_delay = Duration::from_secs(2);
                expected
            },
            vec![],
        ),
        (
            // A sentinel section with a retry delay that rlock can only approximate.
            redisson_4_7(
                "sentinelServersConfig",
                r#"  sentinelAddresses:
  - "redis://127.0.0.1:26379"
  masterName: "mymaster"
  sentinelUsername: null
  sentinelPassword: null
  database: 0
  natMapper: !<org.redisson.api.DefaultNatMapper> {}
  scanInterval: 1000
  checkSentinelsList: true
  checkSlaveStatusWithSyncing: true
  sentinelsDiscovery: true
"#,
                true,
            )
            .replace(
                "retryDelay: !<org.redisson.config.EqualJitterDelay> {baseDelay: PT1S",
                "retryDelay: !<org.redisson.config.FullJitterDelay> {baseDelay: PT0.5S",
            ),
            {
                let mut expected = Config::sentinel("mymaster", ["redis://127.0.0.1:26379/"]);
                expected.topology = Topology::Sentinel {
                    master_name: "mymaster".into(),
                    username: None,
                    password: Some("s3cret pw".into()),
                };
                expected.retry_delay = Duration::from_millis(500);
                expected.retry_max_delay = Duration::from_secs(2);
                expected
            },
            vec![
                "sentinelServersConfig.retryDelay FullJitterDelay: FullJitterDelay waits a random \
                 time between 0 and the doubled delay; rlock doubles from baseDelay up to \
                 maxDelay and waits half of that plus a random part of the other half \
                 (EqualJitterDelay), with the same baseDelay and maxDelay",
            ],
        ),
    ];
    for (yaml, expected, expected_warnings) in cases {
        let (config, logs) = load_logged(&yaml);
        assert_eq!(config.expect("a Redisson 4.7 file"), expected, "{yaml}");
        assert!(!logs.contains("unknown key"), "{logs}");
        assert_eq!(warnings(&logs), expected_warnings, "{logs}");
    }
}

#[test]
fn a_custom_name_mapper_is_refused_naming_the_key_and_the_class() {
    let yaml = single_server_4_7(6379).replace(
        "\nnameMapper: !<org.redisson.api.DefaultNameMapper> {}",
        "\nnameMapper: !<com.example.PrefixMapper> {prefix: \"app:\"}",
    );
    let (config, logs) = load_logged(&yaml);
    let Err(Error::InvalidArgument(message)) = config else {
        panic!("not refused: {config:?}");
    };
    assert!(
        message.starts_with("nameMapper: class com.example.PrefixMapper refused: "),
        "{message}"
    );
    for part in [
        "cannot run Java code",
        "would not exclude each other",
        "Config::name_mapper",
        "--name-prefix PREFIX",
    ] {
        assert!(message.contains(part), "{part}: {message}");
    }
    assert!(warnings(&logs).is_empty(), "{logs}");
}

#[tokio::test]
async fn a_4_7_file_with_a_top_level_password_logs_in() {
    let password = "s3cret pw";
    let server = RedisServer::start_authenticated(None, password, &["--requirepass", password]);
    let yaml = single_server_4_7(server.port())
        .replace("lockWatchdogTimeout: 30000", "lockWatchdogTimeout: 3000");
    let pttl = pttl_while_held(load(&yaml), "yaml:4.7", &server).await;
    assert!(0 < pttl && pttl <= 3000, "PTTL {pttl}");
}

#[tokio::test]
async fn a_4_7_file_with_a_top_level_acl_user_logs_in() {
    let server = RedisServer::start_acl_user("locker", "locker-pw");
    let yaml = single_server_4_7(server.port())
        .replace(
            "password: \"s3cret pw\"\nusername: null",
            "password: \"locker-pw\"\nusername: \"locker\"",
        )
        .replace("lockWatchdogTimeout: 30000", "lockWatchdogTimeout: 3000");
    let config = load(&yaml);
    assert_eq!(
        config.url,
        format!("redis://locker:locker-pw@127.0.0.1:{}/", server.port())
    );
    let pttl = pttl_while_held(config, "yaml:acl", &server).await;
    assert!(0 < pttl && pttl <= 3000, "PTTL {pttl}");
}

/// Redisson's `pingConnectionInterval` is the subscriber's keepalive; 0 turns it off, as in Java.
#[test]
fn the_subscriber_keepalive_is_read_and_zero_turns_it_off() {
    let interval = |extra: &str| {
        load(&format!(
            "singleServerConfig:\n  address: \"redis://127.0.0.1:6379\"\n{extra}"
        ))
        .ping_connection_interval
    };
    assert_eq!(interval(""), Duration::from_secs(30), "Redisson's default");
    assert_eq!(
        interval("  pingConnectionInterval: 5000\n"),
        Duration::from_secs(5)
    );
    assert_eq!(interval("  pingConnectionInterval: 0\n"), Duration::ZERO);
}
