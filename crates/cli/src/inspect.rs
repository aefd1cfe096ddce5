//! `rlock inspect`: a lock's holders as stored in Redis.
//!
//! This reads the hash directly instead of going through the lock API, so it shows holds of any
//! client: rlock's, and Redisson's `RLock` and `RReadWriteLock` alike (PROTOCOL.md §2.1).

use std::process::ExitCode;

use serde::Serialize;

use crate::target::Target;
use crate::{Result, output};

/// The field in which a Redisson read-write lock stores its mode; it is not a holder.
const MODE_FIELD: &str = "mode";

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The lock name.
    #[arg(value_parser = crate::lock_name)]
    name: String,
}

#[derive(Debug, Serialize)]
struct Report {
    name: String,
    exists: bool,
    pttl: i64,
    holders: Vec<Holder>,
}

#[derive(Debug, PartialEq, Serialize)]
struct Holder {
    /// The holder's client uuid.
    node: String,
    /// The owner id within that client (a Java thread id, kept as text as Java ids are longs), with
    /// a `:write` suffix for a read-write lock's write holds.
    owner: String,
    count: u64,
}

pub(crate) async fn run(target: &Target, args: Args) -> Result<ExitCode> {
    let mut redis = target.redis().await?;
    // One transaction, so the type, TTL and holders are a consistent snapshot. HGETALL fails on a
    // key of another type; its error is kept in place so the type can be reported instead.
    let (kind, pttl, fields): (String, i64, redis::RedisResult<Vec<(String, String)>>) =
        redis::pipe()
            .atomic()
            .ignore_errors()
            .cmd("TYPE")
            .arg(&args.name)
            .cmd("PTTL")
            .arg(&args.name)
            .cmd("HGETALL")
            .arg(&args.name)
            .query_async(&mut redis)
            .await?;
    let holders = match kind.as_str() {
        "none" => Vec::new(),
        "hash" => holders(fields?),
        other => {
            return Err(format!("key {:?} holds a {other}, not a lock hash", args.name).into());
        }
    };
    output::emit(&Report {
        exists: kind != "none",
        name: args.name,
        pttl,
        holders,
    })?;
    Ok(ExitCode::SUCCESS)
}

/// The holders among a lock hash's fields: `<uuid>:<owner>` with a decimal count.
fn holders(fields: Vec<(String, String)>) -> Vec<Holder> {
    fields
        .into_iter()
        .filter(|(field, _)| field != MODE_FIELD)
        .filter_map(|(field, count)| {
            let holder = parse_holder(&field, &count);
            if holder.is_none() {
                eprintln!("warning: skipping field {field:?} = {count:?}: not a lock holder");
            }
            holder
        })
        .collect()
}

fn parse_holder(field: &str, count: &str) -> Option<Holder> {
    // The uuid has no colon, so the first one ends it; the owner may have more (`57:write`).
    let (node, owner) = field.split_once(':')?;
    if node.is_empty() || owner.is_empty() {
        return None;
    }
    Some(Holder {
        node: node.to_owned(),
        owner: owner.to_owned(),
        count: count.parse().ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const NODE: &str = "3b241101-e2bb-4255-8caf-4136c566a962";

    fn field(value: &str) -> (String, String) {
        (format!("{NODE}:{value}"), "2".to_owned())
    }

    #[test]
    fn redisson_fields_are_holders() {
        let fields = vec![
            field("57"),
            field("9223372036854775807:write"),
            ("mode".to_owned(), "write".to_owned()),
        ];
        let owners: Vec<_> = holders(fields).into_iter().map(|h| h.owner).collect();
        assert_eq!(owners, ["57", "9223372036854775807:write"]);
    }

    #[test]
    fn malformed_fields_are_not_holders() {
        assert_eq!(parse_holder("no-colon", "1"), None);
        assert_eq!(parse_holder(&format!("{NODE}:57"), "many"), None);
        assert_eq!(parse_holder(&format!("{NODE}:"), "1"), None);
    }
}
