//! `rlock watch`: an operator's live view of locks, refreshed every interval.
//!
//! Each refresh reads every watched lock as `inspect` does ([`lock_state`]) and adds two things
//! that only a watcher sees:
//! - `subscribers`: how many connections listen on the lock's channels (`PUBSUB NUMSUB`, or
//!   `PUBSUB SHARDNUMSUB` with sharded pub/sub, summed over the cluster's nodes), this watcher's own
//!   subscriptions left out: the waiters of every client, Redisson's included, that wait for a
//!   message rather than poll;
//! - `releases`: the unlock messages seen on those channels since the previous refresh. Only
//!   published releases can be seen: a spin lock publishes nothing, and neither does an rlock release
//!   handed straight to another task of the same process (local hand-off); a forced unlock counts.
//!
//! The channels of a name are those of every kind that could be there, so the counts hold whatever
//! the kind: the reentrant (and fenced) lock's `redisson_lock__channel:{name}`, the read-write lock's
//! `redisson_rwlock:{name}`, and the channel of each waiter in a fair lock's queue (a fair lock
//! publishes to its queue head only), followed as the queue changes.
//!
//! With `--json`, every refresh prints one JSON object per lock (see [`Sample`]); otherwise a table,
//! redrawn in place on a terminal and printed frame after frame elsewhere.
//!
//! With `--name-prefix`, a name's keys and channels are those of the mapped name (the prefix and the
//! name), as for every command; the table and `name` show the name as given, and JSON adds `key`.

use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use rlock_redisson::{ChannelListener, Client};
use serde::Serialize;

use crate::entry::{EntryArgs, EntryKind};
use crate::lock_state::{self, Key, LockState};
use crate::target::Target;
use crate::{Result, output};

/// The longest the first refresh waits for the channel subscriptions, so that it counts releases
/// from the start.
const SUBSCRIBE_WAIT: Duration = Duration::from_secs(2);

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The locks to watch, of any kind (each one's kind is read from what Redis holds).
    #[arg(required_unless_present = "entry", conflicts_with = "entry",
          value_parser = crate::non_empty_name)]
    names: Vec<String>,
    /// Or one lock of a map's, multimap's or set's entry, in place of the names.
    #[command(flatten)]
    entry: EntryArgs,
    /// Which of the entry's locks, with --entry (rw, read and write all name its read-write lock).
    #[arg(long, value_enum, default_value_t, requires = "entry")]
    kind: EntryKind,
    /// How often to refresh.
    #[arg(long, value_name = "MS", default_value_t = 1000,
          value_parser = clap::value_parser!(u64).range(1..))]
    interval_ms: u64,
    /// Stop after this many refreshes [default: until Ctrl-C].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    count: Option<u64>,
    /// One JSON object per lock and refresh on stdout instead of the table.
    #[arg(long)]
    json: bool,
}

pub(crate) async fn run(target: &Target, args: Args) -> Result<ExitCode> {
    // Ctrl-C is how a watch normally ends, from the start on. Stopping the watch between two awaits
    // is clean: it only reads, and prints each frame in one synchronous write.
    tokio::select! {
        stop = tokio::signal::ctrl_c() => {
            stop?;
            Ok(ExitCode::SUCCESS)
        }
        watched = watch(target, &args) => watched,
    }
}

/// Refreshes until `--count` refreshes are shown.
async fn watch(target: &Target, args: &Args) -> Result<ExitCode> {
    let entry = args.entry.name(&target.config()?, args.kind.object())?;
    let client = target.client().await?;
    let mut locks: Vec<Watched> = args
        .names
        .iter()
        .chain(&entry)
        .map(|name| Watched::new(&client, name))
        .collect();
    let confirmed = async {
        for counter in locks.iter().flat_map(|lock| &lock.channels) {
            counter.listener.confirmed().await;
        }
    };
    // An unconfirmed subscription only misses what is published before it is: go on regardless.
    let _ = tokio::time::timeout(SUBSCRIBE_WAIT, confirmed).await;

    let mut screen = Screen::new(args.json);
    let mut ticks = tokio::time::interval(Duration::from_millis(args.interval_ms));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut refresh = 0;
    let mut previous = Instant::now();
    while args.count.is_none_or(|count| refresh < count) {
        let _ = ticks.tick().await;
        let mut rows = Vec::with_capacity(locks.len());
        for lock in &mut locks {
            rows.push(lock.observe(&client).await);
        }
        refresh += 1;
        let now = Instant::now();
        let elapsed = now - previous;
        previous = now;
        screen.show(&Frame {
            refresh,
            interval_ms: args.interval_ms,
            elapsed,
            rows,
        })?;
    }
    Ok(ExitCode::SUCCESS)
}

/// One channel listened to, and how many of its messages were counted so far.
#[derive(Debug)]
struct Counter {
    listener: ChannelListener,
    counted: u64,
}

impl Counter {
    fn new(listener: ChannelListener) -> Self {
        let counted = listener.messages();
        Self { listener, counted }
    }

    /// The messages received since the last call.
    fn take(&mut self) -> u64 {
        let messages = self.listener.messages();
        let new = messages.saturating_sub(self.counted);
        self.counted = messages;
        new
    }
}

/// One watched lock and its channels.
#[derive(Debug)]
struct Watched {
    name: String,
    /// The channels every waiter of the name shares: the lock's and the read-write lock's.
    channels: Vec<Counter>,
    /// The own channels of a fair lock's queued waiters, by hash field.
    waiters: HashMap<String, Counter>,
}

/// What one refresh saw of one lock.
#[derive(Debug)]
struct Observed {
    key: Key,
    state: LockState,
    subscribers: u64,
    releases: u64,
}

/// One lock's line of a refresh: what was seen, or why it could not be.
#[derive(Debug)]
struct Row {
    name: String,
    observed: Result<Observed, String>,
}

impl Watched {
    fn new(client: &Client, name: &str) -> Self {
        let shared = [
            client.lock(name).listen(""),
            client.read_write_lock(name).read().listen(""),
        ];
        Self {
            name: name.to_owned(),
            channels: shared.into_iter().flatten().map(Counter::new).collect(),
            waiters: HashMap::new(),
        }
    }

    async fn observe(&mut self, client: &Client) -> Row {
        let observed = self.try_observe(client).await;
        Row {
            name: self.name.clone(),
            observed: observed.map_err(|e| e.to_string()),
        }
    }

    async fn try_observe(&mut self, client: &Client) -> Result<Observed> {
        let (key, state) = lock_state::read(client, self.name.clone()).await?;
        let fair = client.fair_lock(self.name.as_str());
        let queued: Vec<&str> = state
            .queue
            .iter()
            .flatten()
            .map(|waiter| waiter.field.as_str())
            .collect();
        // Counted before the subscriptions follow the queue, so a waiter that just left still
        // counts for the releases published to it.
        let releases = self.channels.iter_mut().map(Counter::take).sum::<u64>()
            + self.waiters.values_mut().map(Counter::take).sum::<u64>();
        let mut channels: Vec<(String, bool)> = self
            .channels
            .iter()
            .map(|counter| {
                (
                    counter.listener.channel().to_owned(),
                    counter.listener.is_live(),
                )
            })
            .collect();
        for field in &queued {
            if let Some(channel) = fair.channel_of(field) {
                let live = self
                    .waiters
                    .get(*field)
                    .is_some_and(|counter| counter.listener.is_live());
                channels.push((channel, live));
            }
        }
        let subscribers = subscribers(client, &channels).await?;
        self.waiters
            .retain(|field, _| queued.contains(&field.as_str()));
        for field in queued {
            if !self.waiters.contains_key(field)
                && let Some(listener) = fair.listen(field)
            {
                let _ = self
                    .waiters
                    .insert(field.to_owned(), Counter::new(listener));
            }
        }
        Ok(Observed {
            key,
            state,
            subscribers,
            releases,
        })
    }
}

/// How many connections other than this client's own listen on `channels` (each with whether this
/// client's subscription to it is live).
async fn subscribers(client: &Client, channels: &[(String, bool)]) -> Result<u64> {
    let count = if client.sharded_pubsub() {
        "SHARDNUMSUB"
    } else {
        "NUMSUB"
    };
    let mut command = redis::cmd("PUBSUB");
    let _ = command.arg(count);
    for (channel, _) in channels {
        let _ = command.arg(channel);
    }
    let counts: HashMap<String, i64> = client.query(&command).await?;
    let others = channels.iter().map(|(channel, own)| {
        let all = counts.get(channel).copied().unwrap_or(0);
        u64::try_from(all - i64::from(*own)).unwrap_or(0)
    });
    Ok(others.sum())
}

/// One refresh of every watched lock.
#[derive(Debug)]
struct Frame {
    refresh: u64,
    interval_ms: u64,
    /// Since the previous refresh (or, for the first, since the subscriptions were made).
    elapsed: Duration,
    rows: Vec<Row>,
}

impl Frame {
    /// `releases` per second over this refresh's interval.
    fn rate(&self, releases: u64) -> f64 {
        let seconds = self.elapsed.as_secs_f64();
        if seconds > 0.0 {
            // Counts stay far below 2^52: exact as f64.
            #[allow(clippy::cast_precision_loss)]
            let releases = releases as f64;
            releases / seconds
        } else {
            0.0
        }
    }
}

/// The JSON object of one lock at one refresh: `inspect`'s lock report (`name` as given, `exists`,
/// `pttl`, `holders`, and `key` with `--name-prefix`, `mode`, `readers`, `queue`, `token` when there
/// are some) plus the kind and what the watcher counts.
#[derive(Debug, Serialize)]
struct Sample<'a> {
    /// When the refresh was printed, in epoch milliseconds.
    t: u64,
    /// The refresh's number, from 1.
    refresh: u64,
    #[serde(flatten)]
    key: &'a Key,
    /// `lock`, `fair`, `fenced` or `read_write`, as the stored state shows.
    kind: &'static str,
    #[serde(flatten)]
    state: &'a LockState,
    /// Connections listening on the lock's channels, this watcher's own left out.
    subscribers: u64,
    /// Unlock messages seen on the lock's channels during the refresh's interval.
    releases: u64,
    releases_per_s: f64,
    /// The interval's actual length.
    elapsed_ms: u64,
}

/// The JSON object of a lock that could not be read at one refresh.
#[derive(Debug, Serialize)]
struct Failure<'a> {
    t: u64,
    refresh: u64,
    name: &'a str,
    error: &'a str,
}

/// Where frames go: JSON lines, a terminal redrawn in place, or plain table frames.
#[derive(Debug)]
enum Screen {
    Json,
    Terminal { drawn: bool },
    Plain,
}

impl Screen {
    fn new(json: bool) -> Self {
        if json {
            Self::Json
        } else if std::io::stdout().is_terminal() {
            Self::Terminal { drawn: false }
        } else {
            Self::Plain
        }
    }

    fn show(&mut self, frame: &Frame) -> Result<()> {
        match self {
            Self::Json => show_json(frame),
            Self::Terminal { drawn } => {
                // Home, each line cleared to its end, then everything below cleared: no flicker.
                let mut text = String::from(if *drawn { "\x1b[H" } else { "\x1b[H\x1b[2J" });
                for line in table(frame) {
                    text.push_str(&line);
                    text.push_str("\x1b[K\n");
                }
                text.push_str("\x1b[J");
                *drawn = true;
                write_out(&text)
            }
            Self::Plain => {
                let mut text = table(frame).join("\n");
                text.push_str("\n\n");
                write_out(&text)
            }
        }
    }
}

fn show_json(frame: &Frame) -> Result<()> {
    let t = output::epoch_ms();
    let elapsed_ms = u64::try_from(frame.elapsed.as_millis()).unwrap_or(u64::MAX);
    for row in &frame.rows {
        match &row.observed {
            Ok(observed) => output::emit(&Sample {
                t,
                refresh: frame.refresh,
                key: &observed.key,
                kind: observed.state.kind().label(),
                state: &observed.state,
                subscribers: observed.subscribers,
                releases: observed.releases,
                releases_per_s: frame.rate(observed.releases),
                elapsed_ms,
            })?,
            Err(error) => output::emit(&Failure {
                t,
                refresh: frame.refresh,
                name: &row.name,
                error,
            })?,
        }
    }
    Ok(())
}

fn write_out(text: &str) -> Result<()> {
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(text.as_bytes())?;
    stdout.flush()?;
    Ok(())
}

/// The widths of the table's columns but the last.
const NAME: usize = 24;
const KIND: usize = 10;
const TTL: usize = 9;
const HOLDER: usize = 50;
const COUNT: usize = 5;
const QUEUE: usize = 5;
const SUBSCRIBERS: usize = 11;

/// The lines of `frame` as a table: a heading, then per lock its holders one per line, and a fair
/// lock's queue below them.
fn table(frame: &Frame) -> Vec<String> {
    let mut lines = vec![
        format!(
            "rlock watch · refresh {} · every {} ms · releases/s: unlock messages seen on the \
             channels (local hand-offs publish none) · Ctrl-C quits",
            frame.refresh, frame.interval_ms
        ),
        format!(
            "{:<NAME$} {:<KIND$} {:>TTL$} {:<HOLDER$} {:>COUNT$} {:>QUEUE$} {:>SUBSCRIBERS$} {}",
            "NAME",
            "KIND",
            "TTL",
            "HOLDER (uuid:owner)",
            "COUNT",
            "QUEUE",
            "SUBSCRIBERS",
            "RELEASES/S"
        ),
    ];
    for row in &frame.rows {
        let observed = match &row.observed {
            Ok(observed) => observed,
            Err(error) => {
                lines.push(format!("{:<NAME$} error: {error}", row.name));
                continue;
            }
        };
        let state = &observed.state;
        let queue = state.queue.as_deref().unwrap_or_default();
        let mut holders = state
            .holders
            .iter()
            .map(|holder| (holder.field(), holder.count.to_string()));
        let (holder, count) = holders.next().unwrap_or_else(|| ("-".into(), "-".into()));
        lines.push(format!(
            "{:<NAME$} {:<KIND$} {:>TTL$} {holder:<HOLDER$} {count:>COUNT$} {:>QUEUE$} \
             {:>SUBSCRIBERS$} {:.2}",
            row.name,
            state.kind().label(),
            ttl(observed.key.pttl),
            queue.len(),
            observed.subscribers,
            frame.rate(observed.releases),
        ));
        for (holder, count) in holders {
            let indent = NAME + KIND + TTL + 3;
            lines.push(format!("{:indent$}{holder:<HOLDER$} {count:>COUNT$}", ""));
        }
        for (position, waiter) in queue.iter().enumerate() {
            let indent = NAME + 1;
            lines.push(format!(
                "{:indent$}queued #{} {}",
                "",
                position + 1,
                waiter.field
            ));
        }
    }
    lines
}

/// A `PTTL` as shown: seconds with a tenth, `-` when the key is missing, `none` without expiry.
fn ttl(pttl: i64) -> String {
    match pttl {
        -2 => "-".into(),
        -1 => "none".into(),
        ms => format!("{}.{}s", ms / 1000, ms % 1000 / 100),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lock_state::Holder;

    fn frame(rows: Vec<Row>) -> Frame {
        Frame {
            refresh: 2,
            interval_ms: 500,
            elapsed: Duration::from_millis(500),
            rows,
        }
    }

    fn held(name: &str, holders: Vec<Holder>, releases: u64) -> Row {
        Row {
            name: name.into(),
            observed: Ok(Observed {
                key: Key {
                    name: name.into(),
                    key: None,
                    exists: true,
                    pttl: 29_870,
                },
                state: LockState {
                    holders,
                    mode: None,
                    readers: None,
                    queue: None,
                    token: None,
                },
                subscribers: 1,
                releases,
            }),
        }
    }

    #[test]
    fn ttls_read_as_seconds_or_say_why_there_is_none() {
        assert_eq!(ttl(29_870), "29.8s");
        assert_eq!(ttl(50), "0.0s");
        assert_eq!(ttl(-1), "none");
        assert_eq!(ttl(-2), "-");
    }

    #[test]
    fn the_table_has_a_line_per_holder_and_rates_per_second() {
        let holder = |owner: &str, count| Holder {
            node: "3b241101-e2bb-4255-8caf-4136c566a962".into(),
            owner: owner.into(),
            count,
        };
        let rows = vec![
            held("orders", vec![holder("57", 2), holder("58", 1)], 3),
            Row {
                name: "broken".into(),
                observed: Err("key holds a list".into()),
            },
        ];
        let lines = table(&frame(rows));
        assert_eq!(lines.len(), 5, "{lines:#?}");
        let first: Vec<&str> = lines[2].split_whitespace().collect();
        assert_eq!(
            first,
            [
                "orders",
                "lock",
                "29.8s",
                "3b241101-e2bb-4255-8caf-4136c566a962:57",
                "2",
                "0",
                "1",
                "6.00"
            ]
        );
        let second: Vec<&str> = lines[3].split_whitespace().collect();
        assert_eq!(second, ["3b241101-e2bb-4255-8caf-4136c566a962:58", "1"]);
        // The second holder lines up under the first.
        assert_eq!(lines[3].find("3b24"), lines[2].find("3b24"));
        assert_eq!(
            lines[4],
            format!("{:<NAME$} error: key holds a list", "broken")
        );
    }
}
