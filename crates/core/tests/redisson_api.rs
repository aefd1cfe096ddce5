//! The Redisson-to-rlock tables of the crate docs (`src/redisson_api.md`, the `redisson_api`
//! module) and the public API stay in step: every rlock method a table names exists, and every
//! public method of a type the tables cover is named in them.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use support::methods;

/// `Type::method` of every table row's rlock column.
fn named_in_tables(doc: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut named: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for row in doc.lines().filter(|line| line.starts_with('|')) {
        let Some(rlock) = row.trim_end_matches('|').rsplit('|').next() else {
            continue;
        };
        let Some((ty, method)) = rlock.trim().trim_matches('`').split_once("::") else {
            continue;
        };
        let _ = named
            .entry(ty.to_owned())
            .or_default()
            .insert(method.to_owned());
    }
    named
}

#[test]
fn the_redisson_tables_name_every_public_method_and_only_those() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("src/redisson_api.md")).expect("the tables");
    let tables = named_in_tables(&doc);
    let api = methods(&root.join("src"), Some("blocking"));
    let mut problems = Vec::new();
    for (ty, named) in &tables {
        let public = api.get(ty).cloned().unwrap_or_default();
        for method in named.difference(&public) {
            problems.push(format!(
                "the tables name {ty}::{method}, which is not public API"
            ));
        }
        for method in public.difference(named) {
            problems.push(format!("{ty}::{method} is public but in no table"));
        }
    }
    assert!(tables.len() >= 10, "the tables cover the kinds: {tables:?}");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
