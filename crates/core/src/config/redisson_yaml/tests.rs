//! The loader as a whole: most tests give [`parse`] a file (and an environment, rather than the
//! process's) and check the `Config`, the warnings or the error that come out, whichever part of
//! the module made them; the class tags, Java durations and placeholders are also tried alone.

use std::collections::HashMap;

use super::java::{class_tags, java_duration};
use super::*;

fn parse_ok(yaml: &str) -> Parsed {
    parse(yaml, |_| None).expect("a valid Redisson config")
}

/// The message of the `InvalidArgument` error `yaml` gives.
fn error(yaml: &str) -> String {
    match parse(yaml, |_| None) {
        Ok(parsed) => panic!("accepted: {:?}", parsed.config),
        Err(Error::InvalidArgument(message)) => message,
        Err(other) => panic!("not an invalid argument: {other:?}"),
    }
}

fn single(extra: &str) -> String {
    format!("singleServerConfig:\n  address: redis://h:1\n{extra}")
}

#[test]
fn serde_yaml_ng_drops_verbatim_tags_so_class_tags_turns_them_into_local_ones() {
    let yaml = "mapper: !<com.example.PrefixMapper> {prefix: \"app:\"}\n";
    #[derive(Debug, Deserialize)]
    struct File {
        mapper: Tagged<serde_yaml_ng::Value>,
    }
    // As written, the class is lost: the value reaches serde as a plain mapping.
    let raw: File = serde_yaml_ng::from_str(yaml).expect("parsed");
    assert_eq!(raw.mapper.class, None);
    let rewritten = class_tags(yaml).expect("rewritten");
    assert_eq!(
        rewritten,
        "mapper: !<!com.example.PrefixMapper> {prefix: \"app:\"}\n"
    );
    // Rewritten, it is an enum whose variant is the class, and the value its content.
    let file: File = serde_yaml_ng::from_str(&rewritten).expect("parsed");
    assert_eq!(
        file.mapper.class.as_deref(),
        Some("com.example.PrefixMapper")
    );
    assert_eq!(file.mapper.value, raw.mapper.value);
}

#[test]
fn class_tags_leave_quotes_comments_and_other_tags_alone() {
    let yaml = "a: \"x !<y>\"\nb: 'it''s !<y>' # !<z>\nc: !<!local> 1\nd: !!str 2\n\
                e: [!<org.A> {}, !<org.B$Inner> {}]\n";
    assert_eq!(
        class_tags(yaml).expect("rewritten"),
        "a: \"x !<y>\"\nb: 'it''s !<y>' # !<z>\nc: !<!local> 1\nd: !!str 2\n\
         e: [!<!org.A> {}, !<!org.B$Inner> {}]\n"
    );
    let message = class_tags("password: pa ss !<word>\n").expect_err("ambiguous");
    assert!(message.to_string().contains("quote it"), "{message}");
    // Where `!<` is part of a plain value's first word, it is no tag and stays.
    assert_eq!(class_tags("p: a!<b>\n").expect("kept"), "p: a!<b>\n");
}

#[test]
fn java_durations() {
    let ok = [
        ("PT1S", Duration::from_secs(1)),
        ("PT0.1S", Duration::from_millis(100)),
        ("PT0.5S", Duration::from_millis(500)),
        ("PT1M", Duration::from_secs(60)),
        ("PT1H2M3.25S", Duration::from_millis(3_723_250)),
        ("P1DT1S", Duration::from_secs(86_401)),
        ("P2D", Duration::from_secs(172_800)),
        ("PT0S", Duration::ZERO),
        ("pt2s", Duration::from_secs(2)),
        ("PT1,5S", Duration::from_millis(1500)),
        ("PT0.000000001S", Duration::from_nanos(1)),
        // Java writes 30 s less than a minute this way.
        ("PT1M-30S", Duration::from_secs(30)),
        ("-PT-1S", Duration::from_secs(1)),
    ];
    for (text, expected) in ok {
        assert_eq!(java_duration("k", text).ok(), Some(expected), "{text}");
    }
    let bad = [
        "",
        "1S",
        "P",
        "PT",
        "PT1",
        "PTS",
        "PT1.5M",
        "PT1S1M",
        "PT0.1234567891S",
        "P1H",
        "PT-0.5S",
        "-PT1S",
        "PT 1S",
        "PT1.S2",
        "1000",
    ];
    for text in bad {
        let Err(Error::InvalidArgument(message)) = java_duration("x.delay", text) else {
            panic!("{text} accepted");
        };
        assert!(message.starts_with("x.delay: "), "{text}: {message}");
    }
}

#[test]
fn top_level_credentials_are_the_sections_fallback() {
    let url = |yaml: &str| parse_ok(yaml).config.url;
    assert_eq!(
        url(&format!("{}username: app\npassword: pw\n", single(""))),
        "redis://app:pw@h:1/"
    );
    // The section's (deprecated) values still apply alone.
    assert_eq!(
        url(&single("  username: own-user\n  password: own\n")),
        "redis://own-user:own@h:1/"
    );
    // Both given: the section's wins, the top level is the fallback; `null` is unset at
    // either level.
    assert_eq!(
        url(&format!(
            "{}password: top\nusername: null\n",
            single("  password: own\n  username: own-user\n")
        )),
        "redis://own-user:own@h:1/"
    );
    assert_eq!(
        url(&format!(
            "{}password: top\nusername: top-user\n",
            single("  password: own\n")
        )),
        "redis://top-user:own@h:1/"
    );
    assert_eq!(
        url(&format!(
            "{}username: null\npassword: null\n",
            single("  password: own\n")
        )),
        "redis://:own@h:1/"
    );
    assert_eq!(
        url(&format!("{}password: top\n", single("  password: null\n"))),
        "redis://:top@h:1/"
    );
    // A password YAML reads as a number is the text Redisson sends.
    assert_eq!(
        url(&format!("{}password: 012345\n", single(""))),
        "redis://:012345@h:1/"
    );
    let sentinel = parse_ok(
        "sentinelServersConfig:\n  sentinelAddresses: [redis://s:1]\n  masterName: m\n  \
         sentinelPassword: spw\npassword: master pw\nusername: app\n",
    );
    assert_eq!(
        sentinel.config.topology,
        Topology::Sentinel {
            master_name: "m".into(),
            username: Some("app".into()),
            password: Some("master pw".into()),
        }
    );
    assert_eq!(sentinel.config.url, "redis://:spw@s:1/");
    let cluster = parse_ok(
        "clusterServersConfig:\n  nodeAddresses: [redis://a:1, redis://b:2]\npassword: pw\n",
    );
    assert_eq!(cluster.config.url, "redis://:pw@a:1/");
    assert_eq!(cluster.config.nodes, ["redis://:pw@b:2/"]);
    let master_slave =
        parse_ok("masterSlaveServersConfig:\n  masterAddress: redis://m:1\npassword: pw\n");
    assert_eq!(master_slave.config.url, "redis://:pw@m:1/");
}

#[test]
fn top_level_tls_settings_are_the_sections_fallback() {
    let tls = |section: &str, top: &str| {
        let yaml = format!("singleServerConfig:\n  address: rediss://h:1\n{section}{top}");
        parse_ok(&yaml).config.url
    };
    let insecure = "rediss://h:1/#insecure";
    assert_eq!(tls("", "sslVerificationMode: NONE\n"), insecure);
    assert_eq!(tls("  sslVerificationMode: NONE\n", ""), insecure);
    // The section's mode wins, the top level's is the fallback.
    assert_eq!(
        tls(
            "  sslVerificationMode: STRICT\n",
            "sslVerificationMode: NONE\n"
        ),
        "rediss://h:1/"
    );
    assert_eq!(
        tls(
            "  sslVerificationMode: null\n",
            "sslVerificationMode: NONE\n"
        ),
        insecure
    );
    assert_eq!(
        tls(
            "  sslVerificationMode: NONE\n",
            "sslVerificationMode: STRICT\n"
        ),
        insecure
    );
    assert_eq!(
        tls(
            "  sslVerificationMode: STRICT\n",
            "sslVerificationMode: null\n"
        ),
        "rediss://h:1/"
    );
    // Java objects that Redisson writes as null pass; others are refused.
    assert_eq!(
        tls(
            "  sslKeyManagerFactory: null\n",
            "sslTrustManagerFactory: null\n"
        ),
        "rediss://h:1/"
    );
    let factory = error(&format!(
        "{}sslTrustManagerFactory: !<javax.net.ssl.TrustManagerFactory> {{}}\n",
        single("")
    ));
    assert!(
        factory.starts_with("sslTrustManagerFactory: rlock cannot run Java code"),
        "{factory}"
    );
    let factory = error(&single(
        "  sslKeyManagerFactory: !<javax.net.ssl.KeyManagerFactory> {}\n",
    ));
    assert!(
        factory.starts_with("singleServerConfig.sslKeyManagerFactory: client certificates"),
        "{factory}"
    );
    // Both levels name a trust store: the section's is read.
    let both = error(&format!(
        "{}sslTruststore: file:/nonexistent/top.pem\n",
        single("  sslTruststore: file:/nonexistent/section.pem\n")
    ));
    assert!(
        both.starts_with("singleServerConfig.sslTruststore: cannot read /nonexistent/section.pem"),
        "{both}"
    );
    // Refusals name the key where the value was found.
    let keystore = error(&format!("{}sslKeystore: file:/k.jks\n", single("")));
    assert!(keystore.starts_with("sslKeystore: "), "{keystore}");
    let keystore = error(&single("  sslKeystore: file:/k.jks\n"));
    assert!(
        keystore.starts_with("singleServerConfig.sslKeystore: "),
        "{keystore}"
    );
    let mode = error(&format!("{}sslVerificationMode: SOMETIMES\n", single("")));
    assert!(mode.starts_with("sslVerificationMode: "), "{mode}");
    let sentinel = error(
        "sentinelServersConfig:\n  sentinelAddresses: [rediss://s:1]\n  masterName: m\n\
         sslTruststore: file:/ca.pem\n",
    );
    assert!(
        sentinel.starts_with("sslTruststore: not supported with Sentinel"),
        "{sentinel}"
    );
}

#[test]
fn retry_delay_objects_map_to_rlocks_retry_delays() {
    let delays = |extra: &str| {
        let parsed = parse_ok(&single(extra));
        let config = parsed.config;
        (config.retry_delay, config.retry_max_delay, parsed.warnings)
    };
    let ms = Duration::from_millis;
    assert_eq!(
        delays(
            "  retryDelay: !<org.redisson.config.EqualJitterDelay> {baseDelay: PT0.1S, maxDelay: PT1M}\n"
        ),
        (ms(100), ms(60_000), vec![])
    );
    assert_eq!(
        delays("  retryDelay: !<org.redisson.config.ConstantDelay> {delay: PT0.5S}\n"),
        (ms(500), ms(500), vec![])
    );
    // A baseDelay above maxDelay: Redisson waits maxDelay (then jitter) every time.
    assert_eq!(
        delays(
            "  retryDelay: !<org.redisson.config.EqualJitterDelay> {baseDelay: PT3S, maxDelay: PT2S}\n"
        ),
        (ms(2000), ms(2000), vec![])
    );
    // retryDelay wins over the deprecated retryInterval, which alone still applies.
    assert_eq!(
        delays(
            "  retryInterval: 1500\n  retryDelay: !<org.redisson.config.EqualJitterDelay> {baseDelay: PT1S, maxDelay: PT2S}\n"
        ),
        (ms(1000), ms(2000), vec![])
    );
    assert_eq!(delays("  retryInterval: 700\n"), (ms(700), ms(700), vec![]));
    let (first, max, warnings) = delays(
        "  retryDelay: !<org.redisson.config.FullJitterDelay> {baseDelay: PT0.2S, maxDelay: PT4S}\n",
    );
    assert_eq!((first, max), (ms(200), ms(4000)));
    assert_eq!(
        warnings,
        [
            "singleServerConfig.retryDelay FullJitterDelay: FullJitterDelay waits a random time \
          between 0 and the doubled delay; rlock doubles from baseDelay up to maxDelay and \
          waits half of that plus a random part of the other half (EqualJitterDelay), with \
          the same baseDelay and maxDelay"
        ]
    );
    let (first, max, warnings) = delays(
        "  retryDelay: !<org.redisson.config.DecorrelatedJitterDelay> {baseDelay: PT1S, maxDelay: PT8S}\n",
    );
    assert_eq!((first, max), (ms(1000), ms(8000)));
    assert_eq!(warnings.len(), 1);
    assert!(
        warnings[0].starts_with("singleServerConfig.retryDelay DecorrelatedJitterDelay: ")
            && warnings[0].contains("three times the previous delay"),
        "{warnings:?}"
    );
    // A class of the service's own: rlock keeps retryInterval's delays.
    let (first, max, warnings) =
        delays("  retryInterval: 900\n  retryDelay: !<com.example.MyDelay> {factor: 3}\n");
    assert_eq!((first, max), (ms(900), ms(900)));
    assert_eq!(warnings.len(), 1);
    assert!(
        warnings[0].starts_with("singleServerConfig.retryDelay com.example.MyDelay ignored: "),
        "{warnings:?}"
    );
    for (extra, key) in [
        (
            "  retryDelay: {baseDelay: PT1S, maxDelay: PT2S}\n",
            "singleServerConfig.retryDelay: names no class",
        ),
        (
            "  retryDelay: !<org.redisson.config.ConstantDelay> {}\n",
            "singleServerConfig.retryDelay.delay: missing",
        ),
        (
            "  retryDelay: !<org.redisson.config.EqualJitterDelay> {baseDelay: PT1S}\n",
            "singleServerConfig.retryDelay.maxDelay: missing",
        ),
        (
            "  retryDelay: !<org.redisson.config.ConstantDelay> {delay: PT1S, maxDelay: PT2S}\n",
            "singleServerConfig.retryDelay.maxDelay: not a setting",
        ),
        (
            "  retryDelay: !<org.redisson.config.EqualJitterDelay> {baseDelay: 1000, maxDelay: PT2S}\n",
            "singleServerConfig.retryDelay.baseDelay: \"1000\" is not",
        ),
    ] {
        let message = error(&single(extra));
        assert!(message.starts_with(key), "{extra}: {message}");
    }
}

#[test]
fn reconnection_delays_and_default_java_objects_pass_silently() {
    let parsed = parse_ok(&format!(
        "{}nameMapper: !<org.redisson.api.DefaultNameMapper> {{}}\n\
         commandMapper: !<org.redisson.config.DefaultCommandMapper> {{}}\n\
         credentialsResolver: !<org.redisson.client.DefaultCredentialsResolver> {{}}\n",
        single(
            "  reconnectionDelay: !<org.redisson.config.EqualJitterDelay> {baseDelay: PT0.1S, maxDelay: PT10S}\n  \
             nameMapper: null\n  commandMapper: !<org.redisson.config.DefaultCommandMapper> {}\n"
        )
    ));
    assert!(parsed.unknown.is_empty(), "{:?}", parsed.unknown);
    assert!(parsed.warnings.is_empty(), "{:?}", parsed.warnings);
}

#[test]
fn a_custom_name_mapper_is_refused_at_either_level() {
    for (yaml, key) in [
        (
            format!(
                "{}nameMapper: !<com.example.PrefixMapper> {{prefix: \"app:\"}}\n",
                single("")
            ),
            "nameMapper: ",
        ),
        (
            single("  nameMapper: !<com.example.PrefixMapper> {prefix: \"app:\"}\n"),
            "singleServerConfig.nameMapper: ",
        ),
    ] {
        let message = error(&yaml);
        assert!(message.starts_with(key), "{message}");
        for part in [
            "com.example.PrefixMapper",
            "cannot run Java code",
            "not exclude each other",
            "Config::name_mapper",
            "--name-prefix PREFIX",
        ] {
            assert!(message.contains(part), "{part}: {message}");
        }
    }
    let message = error(&format!("{}nameMapper: {{prefix: x}}\n", single("")));
    assert!(
        message.starts_with("nameMapper: names no class"),
        "{message}"
    );
}

#[test]
fn every_warning() {
    let parsed = parse_ok(&format!(
        "{}commandMapper: !<com.example.Renamer> {{}}\n\
         credentialsResolver: !<com.example.Iam> {{region: eu}}\n\
         sslKeystorePassword: secret\nsslVerificationMode: CA_ONLY\n\
         sslEnableEndpointIdentification: false\n",
        "singleServerConfig:\n  address: rediss://h:1\n  \
         retryDelay: !<org.redisson.config.FullJitterDelay> {baseDelay: PT1S, maxDelay: PT2S}\n  \
         credentialsResolver: !<com.example.Vault> {}\n  colour: blue\n"
    ));
    assert_eq!(parsed.unknown, ["singleServerConfig.colour"]);
    let rlock_commands = "ignored: rlock cannot run Java code and sends Redis' own command \
                          names (EVAL, EVALSHA, PUBLISH, ...); if the server renames any of \
                          them, rlock's commands fail";
    let credentials = "ignored: rlock cannot run Java code; credentials come from username \
                       and password only";
    let host_names = "ignored: rlock always verifies the server's host name; certificates \
                      must name it";
    assert_eq!(
        parsed.warnings,
        [
            format!("commandMapper com.example.Renamer {rlock_commands}"),
            format!("credentialsResolver com.example.Iam {credentials}"),
            format!("singleServerConfig.credentialsResolver com.example.Vault {credentials}"),
            format!("sslEnableEndpointIdentification false {host_names}"),
            format!("sslVerificationMode CA_ONLY {host_names}"),
            "singleServerConfig.retryDelay FullJitterDelay: FullJitterDelay waits a random \
             time between 0 and the doubled delay; rlock doubles from baseDelay up to \
             maxDelay and waits half of that plus a random part of the other half \
             (EqualJitterDelay), with the same baseDelay and maxDelay"
                .to_owned(),
            "sslKeystorePassword ignored: client certificates are not supported".to_owned(),
        ]
    );
}

#[test]
fn placeholders_take_the_environment_then_the_default() {
    let env = |name: &str| (name == "PORT").then(|| "7000".to_owned());
    let yaml = "a: ${PORT} b: ${HOST:-h} c: pa$$word d: ${PORT:-1}";
    assert_eq!(
        substitute(yaml, env).expect("substituted"),
        "a: 7000 b: h c: pa$$word d: 7000"
    );
    assert_eq!(
        substitute("x: ${UNCLOSED", env).expect("kept"),
        "x: ${UNCLOSED"
    );
    let missing = substitute("x: ${NOPE}", env).expect_err("unset without default");
    assert!(missing.to_string().contains("${NOPE}"), "{missing}");
}

#[test]
fn credentials_are_percent_encoded_into_the_url() {
    let parsed = parse_ok(
        "singleServerConfig:\n  address: redis://h:1\n  username: app\n  password: \"p@ss:w/rd\"\n",
    );
    assert_eq!(parsed.config.url, "redis://app:p%40ss%3Aw%2Frd@h:1/");
    let info = redis::IntoConnectionInfo::into_connection_info(parsed.config.url.as_str())
        .expect("redis reads the URL");
    assert_eq!(info.redis_settings().password(), Some("p@ss:w/rd"));
    assert_eq!(info.redis_settings().username(), Some("app"));
}

#[test]
fn credentials_in_the_address_win_over_the_files() {
    let url = |yaml: &str| parse_ok(yaml).config.url;
    let address = "singleServerConfig:\n  address: \"redis://own:p%40ss@h:1\"\n";
    assert_eq!(url(address), "redis://own:p%40ss@h:1/");
    assert_eq!(
        url(&format!("{address}username: app\npassword: pw\n")),
        "redis://own:p%40ss@h:1/"
    );
    assert_eq!(
        url("singleServerConfig:\n  address: \"redis://:p%40ss@h:1\"\nusername: app\n"),
        "redis://app:p%40ss@h:1/"
    );
}

#[test]
fn valkey_schemes_and_insecure_tls_map_to_redis_urls() {
    let parsed = parse_ok(
        "clusterServersConfig:\n  nodeAddresses: [\"valkeys://a:1\", \"valkey://b:2\"]\n  sslVerificationMode: NONE\n",
    );
    assert_eq!(parsed.config.url, "rediss://a:1/#insecure");
    assert_eq!(parsed.config.nodes, ["redis://b:2/"]);
}

#[test]
fn tags_nulls_and_redisson_only_keys_pass_silently() {
    let parsed = parse_ok(
        "singleServerConfig:\n  address: redis://h:1\n  clientName: null\n  password: null\n  \
         loadBalancer: !<org.redisson.connection.balancer.RoundRobinLoadBalancer> {}\n\
         threads: 16\ncodec: !<org.redisson.codec.Kryo5Codec> {}\ntransportMode: NIO\n",
    );
    assert!(parsed.unknown.is_empty(), "{:?}", parsed.unknown);
    assert_eq!(parsed.config.url, "redis://h:1/");
}

#[test]
fn unknown_and_misplaced_keys_are_reported() {
    let parsed = parse_ok(
        "singleServerConfig:\n  address: redis://h:1\n  nodeAddresses: [redis://x:1]\n  \
         colour: blue\nlockWatchdogTimeot: 5\n",
    );
    let mut unknown = parsed.unknown;
    unknown.sort();
    assert_eq!(
        unknown,
        [
            "lockWatchdogTimeot",
            "singleServerConfig.colour",
            "singleServerConfig.nodeAddresses"
        ]
    );
}

#[test]
fn bad_values_name_their_key() {
    let cases = [
        (
            "clusterServersConfig:\n  nodeAddresses: [\"redis://a:1\", \"http://b:2\"]\n",
            "clusterServersConfig.nodeAddresses[1]",
        ),
        (
            "singleServerConfig:\n  address: redis://h:1\n  timeout: soon\n",
            "singleServerConfig.timeout",
        ),
        (
            "singleServerConfig:\n  address: redis://h:1\n  connectTimeout: 0\n",
            "singleServerConfig.connectTimeout",
        ),
        (
            "singleServerConfig:\n  database: 1\n",
            "singleServerConfig.address",
        ),
        (
            "clusterServersConfig:\n  nodeAddresses: [redis://a:1]\n  shardedSubscriptionMode: SOMETIMES\n",
            "clusterServersConfig.shardedSubscriptionMode",
        ),
        (
            "sentinelServersConfig:\n  sentinelAddresses: [redis://s:1]\n",
            "sentinelServersConfig.masterName",
        ),
        (
            "sentinelServersConfig:\n  sentinelAddresses: [redis://s:1]\n  masterName: m\n  database: 2\n",
            "sentinelServersConfig.database",
        ),
        (
            "sentinelServersConfig:\n  sentinelAddresses: [rediss://s:1]\n  masterName: m\n  sslTruststore: file:/ca.pem\n",
            "sentinelServersConfig.sslTruststore",
        ),
        (
            "singleServerConfig:\n  address: rediss://h:1\n  sslKeystore: file:/k.jks\n",
            "singleServerConfig.sslKeystore",
        ),
        (
            "singleServerConfig:\n  address: redis://h:1\nlockWatchdogTimeout: -5\n",
            "lockWatchdogTimeout",
        ),
        (
            "replicatedServersConfig:\n  nodeAddresses: []\n",
            "replicatedServersConfig",
        ),
        ("codec: !<x> {}\n", "no singleServerConfig"),
        (
            "singleServerConfig:\n  address: redis://h:1\nclusterServersConfig:\n  nodeAddresses: [redis://a:1]\n",
            "only one topology",
        ),
    ];
    for (yaml, key) in cases {
        let message = error(yaml);
        assert!(message.contains(key), "{yaml}: {message}");
    }
}

#[test]
fn a_jks_trust_store_is_refused_and_a_pem_one_trusted() {
    let dir = std::env::temp_dir();
    let pem = dir.join(format!("rlock-ca-{}.pem", std::process::id()));
    let jks = dir.join(format!("rlock-ca-{}.jks", std::process::id()));
    std::fs::write(
        &pem,
        "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
    )
    .expect("write pem");
    std::fs::write(&jks, [0xfe, 0xed, 0xfe, 0xed, 0, 0, 0, 2]).expect("write jks");
    let yaml = |store: &Path| {
        format!(
            "singleServerConfig:\n  address: rediss://h:1\n  sslTruststore: file:{}\n  \
             sslTruststorePassword: changeit\n",
            store.display()
        )
    };
    let trusted = parse_ok(&yaml(&pem)).config.tls_root_cert;
    let refused = error(&yaml(&jks));
    let _ = (std::fs::remove_file(&pem), std::fs::remove_file(&jks));
    assert!(trusted.is_some_and(|cert| cert.starts_with(b"-----BEGIN")));
    assert!(
        refused.contains("singleServerConfig.sslTruststore") && refused.contains("PEM"),
        "{refused}"
    );
}

#[test]
fn nat_mappers_fill_the_nat_map() {
    let parsed = parse_ok(
        "clusterServersConfig:\n  nodeAddresses: [redis://a:1]\n  natMapper: \
         !<org.redisson.api.HostPortNatMapper> {hostsPortMap: {\"10.0.0.1:7000\": \"127.0.0.1:17000\"}}\n",
    );
    let expected = HashMap::from([("10.0.0.1:7000".to_owned(), "127.0.0.1:17000".to_owned())]);
    assert_eq!(parsed.config.nat_map, expected);
    let old = parse_ok(
        "clusterServersConfig:\n  nodeAddresses: [redis://a:1]\n  natMap: {\"10.0.0.1:7000\": \"127.0.0.1:17000\"}\n",
    );
    assert_eq!(old.config.nat_map, expected);
    let message = error(
        "clusterServersConfig:\n  nodeAddresses: [redis://a:1]\n  natMapper: {hostsMap: {}}\n",
    );
    assert!(
        message.contains("clusterServersConfig.natMapper.hostsMap"),
        "{message}"
    );
    let message = error(
        "clusterServersConfig:\n  nodeAddresses: [redis://a:1]\n  natMapper: !<org.redisson.api.HostNatMapper> {hostsMap: {}}\n",
    );
    assert!(
        message.starts_with("clusterServersConfig.natMapper: HostNatMapper"),
        "{message}"
    );
    let message = error(
        "clusterServersConfig:\n  nodeAddresses: [redis://a:1]\n  natMapper: !<com.example.K8sMapper> {}\n",
    );
    assert!(
        message.starts_with("clusterServersConfig.natMapper: class com.example.K8sMapper"),
        "{message}"
    );
    // The identity, which Redisson writes into every file, also with Sentinel.
    let identity = "natMapper: !<org.redisson.api.DefaultNatMapper> {}\n";
    let cluster = parse_ok(&format!(
        "clusterServersConfig:\n  nodeAddresses: [redis://a:1]\n  {identity}"
    ));
    assert!(cluster.config.nat_map.is_empty());
    let sentinel = parse_ok(&format!(
        "sentinelServersConfig:\n  sentinelAddresses: [redis://s:1]\n  masterName: m\n  {identity}"
    ));
    assert!(sentinel.unknown.is_empty(), "{:?}", sentinel.unknown);
    let message = error(
        "sentinelServersConfig:\n  sentinelAddresses: [redis://s:1]\n  masterName: m\n  natMapper: \
         !<org.redisson.api.HostPortNatMapper> {hostsPortMap: {\"a:1\": \"b:2\"}}\n",
    );
    assert!(
        message.starts_with("sentinelServersConfig.natMapper: not supported"),
        "{message}"
    );
}

#[test]
fn the_codec_names_entry_locks_and_one_rlock_cannot_reproduce_is_kept_with_a_warning() {
    assert_eq!(parse_ok(&single("")).config.codec, Codec::Kryo5);
    for (class, codec) in [
        ("org.redisson.codec.Kryo5Codec", Codec::Kryo5),
        ("org.redisson.client.codec.StringCodec", Codec::String),
        ("org.redisson.client.codec.LongCodec", Codec::Long),
        ("org.redisson.codec.JsonJacksonCodec", Codec::JsonJackson),
    ] {
        let parsed = parse_ok(&single(&format!("codec: !<{class}> {{}}\n")));
        assert_eq!(parsed.config.codec, codec, "{class}");
        assert!(parsed.warnings.is_empty(), "{:?}", parsed.warnings);
        assert!(parsed.unknown.is_empty(), "{:?}", parsed.unknown);
    }
    let parsed = parse_ok(&single(
        "codec: !<org.redisson.codec.SnappyCodecV2> {innerCodec: !<org.redisson.codec.Kryo5Codec> {}}\n",
    ));
    assert_eq!(
        parsed.config.codec,
        Codec::Other("org.redisson.codec.SnappyCodecV2".into())
    );
    assert!(
        parsed.warnings[0].contains("EntryKey::Encoded"),
        "{:?}",
        parsed.warnings
    );
    assert!(error(&single("codec: {}\n")).contains("codec"));
}
