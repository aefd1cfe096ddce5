//! Proxy faults under the history checker, in every topology: `rlock-torture` workers contend for
//! two locks through fault proxies (`rlock_tests::proxied`) while the proxies lose the replies of
//! scripts that ran, hold replies back, and reset every connection, at random.
//!
//! Besides the checker's verdict (no overlap outside signalled lease loss, every attempt completed,
//! no hold left in Redis), a monitor reads the lock hashes on the master directly every 2 ms: the
//! workers never re-enter, so a hold count of 2 is an acquire applied twice (what a client that
//! re-sends a script after a lost reply does), and must never be seen.
//!
//! Each scenario runs a few seconds in the default suite; `scripts/soak.sh` runs them longer
//! (`RLOCK_SOAK_SECS`) and adds up their figures.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use redis::Commands;
use rlock_tests::history::{FaultKind, Fleet, WorkerSpec, publish, scenario_length};
use rlock_tests::proxied::{Deployment, Proxied};
use rlock_tests::proxy::{FaultProxy, Match};
use rlock_tests::topology::{SentinelSetup, connect};

const TORTURE: &str = env!("CARGO_BIN_EXE_rlock-torture");
/// One hash tag: every lock on one master, in a cluster too.
const NAMES: [&str; 2] = ["{proxied}a", "{proxied}b"];

/// The `rlock-torture work` flags that reach `proxied` through its proxies.
fn client_args(proxied: &Proxied) -> (String, Vec<String>) {
    let config = proxied.config();
    let topology = match proxied.deployment {
        Deployment::Single => "single",
        Deployment::MasterReplica => "master-replica",
        Deployment::Sentinel => "sentinel",
        Deployment::Cluster => "cluster",
    };
    let mut args = vec!["--topology".to_owned(), topology.to_owned()];
    if !config.nodes.is_empty() {
        args.extend(["--nodes".to_owned(), config.nodes.join(",")]);
    }
    if !config.nat_map.is_empty() {
        let pairs: Vec<String> = config
            .nat_map
            .iter()
            .map(|(from, to)| format!("{from}={to}"))
            .collect();
        args.extend(["--nat-map".to_owned(), pairs.join(",")]);
    }
    if proxied.deployment == Deployment::Sentinel {
        args.extend([
            "--master-name".to_owned(),
            SentinelSetup::MASTER_NAME.to_owned(),
        ]);
    }
    let master = proxied.master_of(NAMES[0]).url();
    args.extend(["--fence-url".to_owned(), master]);
    (config.url, args)
}

/// Reads the lock hashes every 2 ms until stopped; returns the fields seen with a count above 1.
fn watch_for_double_applies(
    proxied: &Proxied,
    stop: Arc<AtomicBool>,
) -> thread::JoinHandle<BTreeSet<String>> {
    let mut conn = connect(proxied.master_of(NAMES[0]));
    thread::spawn(move || {
        let mut seen = BTreeSet::new();
        while !stop.load(Ordering::Relaxed) {
            for name in NAMES {
                let holds: Vec<(String, String)> = conn.hgetall(name).unwrap_or_default();
                for (field, count) in holds {
                    if count.parse::<u64>().is_ok_and(|count| count > 1) {
                        let _ = seen.insert(format!("{name} {field}"));
                    }
                }
            }
            thread::sleep(Duration::from_millis(2));
        }
        seen
    })
}

/// Injects random proxy faults into `proxy` until `until`, recording them in the fleet's history
/// (lost replies once they fired).
fn inject(proxy: &FaultProxy, until: Instant, fleet: &Mutex<Fleet>) {
    let lost_before = proxy.lost_replies();
    while Instant::now() < until {
        thread::sleep(Duration::from_millis(fastrand::u64(100..300)));
        match fastrand::u8(0..4) {
            0 | 1 => proxy.lose_reply(Match::command("EVALSHA"), fastrand::usize(1..=5)),
            2 => {
                proxy.delay_replies(Duration::from_millis(fastrand::u64(20..200)));
                thread::sleep(Duration::from_millis(300));
                proxy.delay_replies(Duration::ZERO);
                fleet
                    .lock()
                    .record_fault("proxy", FaultKind::DelayedReplies);
            }
            _ => {
                proxy.reset();
                fleet
                    .lock()
                    .record_fault("proxy", FaultKind::ConnectionReset);
            }
        }
    }
    for _ in lost_before..proxy.lost_replies() {
        fleet.lock().record_fault("proxy", FaultKind::LostReply);
    }
}

fn scenario(deployment: Deployment) {
    let proxied = Proxied::start(deployment);
    let (url, args) = client_args(&proxied);
    let run_for = scenario_length(Duration::from_secs(4));
    let spec = WorkerSpec {
        run_for,
        hold: Duration::from_millis(10),
        command_timeout: Duration::from_millis(500),
        client_args: args,
        ..WorkerSpec::new(&NAMES)
    };
    let fleet = Mutex::new(Fleet::new(TORTURE, &proxied.master_of(NAMES[0]).url()));
    for _ in 0..3 {
        let _ = fleet.lock().spawn_on(&url, &spec);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let monitor = watch_for_double_applies(&proxied, stop.clone());
    inject(proxied.proxy_of(NAMES[0]), Instant::now() + run_for, &fleet);
    let report = fleet.into_inner().finish(Duration::from_secs(3));
    stop.store(true, Ordering::Relaxed);
    let doubles = monitor.join().expect("the monitor did not panic");
    let mut summary = report.summary(&format!("proxy_faults::{deployment:?}"));
    summary.double_applies = doubles.len();
    publish(&summary);
    assert!(doubles.is_empty(), "acquires applied twice: {doubles:?}");
    assert!(
        summary
            .faults
            .get(FaultKind::LostReply.label())
            .is_some_and(|lost| *lost > 0),
        "some replies were lost: {:?}",
        summary.faults
    );
    report.assert_sound();
}

#[test]
fn proxy_faults_single() {
    scenario(Deployment::Single);
}

#[test]
fn proxy_faults_master_replica() {
    scenario(Deployment::MasterReplica);
}

#[test]
fn proxy_faults_sentinel() {
    scenario(Deployment::Sentinel);
}

#[test]
fn proxy_faults_cluster() {
    scenario(Deployment::Cluster);
}
