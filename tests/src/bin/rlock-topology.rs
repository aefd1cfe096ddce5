//! `rlock-topology`: runs a local Redis Cluster or Sentinel setup (see `rlock_tests::topology`) for
//! manual testing and for `scripts/topology.sh`.
//!
//! ```text
//! rlock-topology cluster [--masters 3] [--replicas 1] [--until-signal]
//! rlock-topology sentinel [--replicas 2] [--sentinels 3] [--until-signal]
//! ```
//!
//! Once the topology is up it prints one JSON line on stdout, e.g.
//! `{"kind":"cluster","seeds":["redis://127.0.0.1:P/",...]}` or
//! `{"kind":"sentinel","master_name":"rlockmaster","sentinels":[...],"master":"redis://..."}`,
//! then runs until its standard input reaches end of file (so a parent that dies takes the topology
//! with it) or it gets SIGTERM or SIGINT. `--until-signal` ignores standard input, for running in the
//! background. On the way out every server is killed and its directory removed.

use std::io::{Read, Write};
use std::process::ExitCode;
use std::sync::mpsc;
use std::thread;

use clap::{Parser, Subcommand};
use rlock_tests::topology::{Cluster, SentinelSetup};
use serde::Serialize;
use tokio::signal::unix::{SignalKind, signal};

#[derive(Parser)]
#[command(about = "Run a local Redis Cluster or Sentinel setup on loopback until stopped")]
struct Cli {
    #[command(subcommand)]
    deployment: Deployment,
    /// Run until SIGTERM or SIGINT only, ignoring standard input.
    #[arg(long, global = true)]
    until_signal: bool,
}

#[derive(Subcommand)]
enum Deployment {
    /// A Redis Cluster.
    Cluster {
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u16).range(1..=64))]
        masters: u16,
        /// Replicas per master.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(0..=8))]
        replicas: u16,
    },
    /// A master with replicas, watched by sentinels.
    Sentinel {
        #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(0..=8))]
        replicas: u16,
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u16).range(1..=9))]
        sentinels: u16,
    },
}

/// A running topology: only ever dropped, which stops its servers.
#[expect(dead_code, reason = "held to be dropped")]
enum Running {
    Cluster(Cluster),
    Sentinel(SentinelSetup),
}

/// The JSON line that tells how to reach the topology.
#[derive(Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
enum Description {
    Cluster {
        seeds: Vec<String>,
    },
    Sentinel {
        master_name: &'static str,
        sentinels: Vec<String>,
        /// The master at start; after a failover, ask the sentinels.
        master: String,
    },
}

fn start(deployment: &Deployment) -> (Running, Description) {
    match *deployment {
        Deployment::Cluster { masters, replicas } => {
            let cluster = Cluster::start(masters.into(), replicas.into());
            let seeds = cluster.seeds();
            (Running::Cluster(cluster), Description::Cluster { seeds })
        }
        Deployment::Sentinel {
            replicas,
            sentinels,
        } => {
            let setup = SentinelSetup::start(replicas.into(), sentinels.into());
            let description = Description::Sentinel {
                master_name: SentinelSetup::MASTER_NAME,
                sentinels: setup.sentinel_urls(),
                master: setup.master.url(),
            };
            (Running::Sentinel(setup), description)
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Listen before starting, so a signal during the (slow) start still stops us cleanly after it.
    let (stop, stopped) = mpsc::channel();
    if let Err(e) = on_signal(stop.clone()) {
        eprintln!("rlock-topology: cannot listen for signals: {e}");
        return ExitCode::FAILURE;
    }
    if !cli.until_signal {
        on_stdin_eof(stop);
    }
    let (running, description) = start(&cli.deployment);
    let reason = match print(&description) {
        Ok(()) => stopped.recv().unwrap_or("every stop source is gone"),
        Err(_) => "stdout is closed",
    };
    eprintln!("rlock-topology: {reason}: stopping");
    drop(running);
    ExitCode::SUCCESS
}

/// Prints `description` as one JSON line, flushed.
fn print(description: &Description) -> std::io::Result<()> {
    let line = serde_json::to_string(description)?;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{line}")?;
    stdout.flush()
}

/// Sends on `stop` at the first SIGTERM or SIGINT.
fn on_signal(stop: mpsc::Sender<&'static str>) -> std::io::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()?;
    let (mut term, mut int) = runtime.block_on(async {
        Ok::<_, std::io::Error>((
            signal(SignalKind::terminate())?,
            signal(SignalKind::interrupt())?,
        ))
    })?;
    let _ = thread::spawn(move || {
        let name = runtime.block_on(async {
            tokio::select! {
                _ = term.recv() => "SIGTERM",
                _ = int.recv() => "SIGINT",
            }
        });
        let _ = stop.send(name);
    });
    Ok(())
}

/// Sends on `stop` once standard input reaches end of file (or fails). The thread stays blocked in
/// its read otherwise; the process exits without waiting for it.
fn on_stdin_eof(stop: mpsc::Sender<&'static str>) {
    let _ = thread::spawn(move || {
        let mut sink = [0; 1024];
        let mut stdin = std::io::stdin().lock();
        while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
        let _ = stop.send("standard input closed");
    });
}
