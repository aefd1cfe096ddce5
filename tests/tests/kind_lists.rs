//! Every lock kind of the library is in every list of kinds outside it. Read from the sources (no
//! Redis), so that a kind added to the library and forgotten in a list fails here, not in a user's
//! hands.
//!
//! **What counts as a kind.** A type exported by the library's `kind` module (the `pub mod kind`
//! block of `crates/core/src/lib.rs`) that is the kind of a lock handle: the `K` of a handle alias
//! `pub type X = Lock<K>` anywhere in `crates/core/src` (`FairLock = Lock<Fair>`, ...), or the
//! default `K` of `pub struct Lock<K: LockKind = K>` (the reentrant lock, which is `Lock` itself).
//! The module's traits (`LockKind`, `FairQueue`, `Twin`) are not kinds; `NonReentrantFair`, an
//! alias of `NonReentrant<Fair>`, is.
//!
//! **The lists.**
//! - The tests' list, `rlock_tests::lock_kinds!` (`tests/src/kinds.rs`): a row a kind, whose
//!   emulator object is named after the library's kind (`<Kind>Kind`). The emulator's
//!   `redisson::KINDS`, the fleet's `FleetKind` and every matrix of tests
//!   (`rlock_tests::kind_matrix!`: the fault scenarios, interop's `every_kind!`) are made from it,
//!   so a kind in it is in all of them but where a scenario skips it; a skip must name a kind of
//!   the list (a stale one would skip nothing).
//! - The CLI's `--kind` (`LockKindArg`, `crates/cli/src/kinds.rs`): a variant a kind, named as
//!   the tests' list names it.
//! - The lost-reply cases (`CASES` of `tests/tests/lost_replies.rs`): at least one case
//!   `<kind>.<script>` a kind, by the name of the tests' list.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

/// The workspace's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ is in the workspace")
        .to_path_buf()
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The `.rs` files under `dir`, recursively.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(path) = pending.pop() {
        if path.is_dir() {
            let entries = fs::read_dir(&path).expect("read_dir");
            pending.extend(entries.map(|entry| entry.expect("entry").path()));
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            found.push(path);
        }
    }
    found
}

/// The text between `start` and the first line after it that is exactly `end`.
fn block<'a>(text: &'a str, start: &str, end: &str) -> &'a str {
    let from = text
        .find(start)
        .unwrap_or_else(|| panic!("`{start}` not found"));
    let rest = &text[from..];
    let to = rest
        .lines()
        .scan(0, |at, line| {
            let here = *at;
            *at += line.len() + 1;
            Some((here, line))
        })
        .find(|(_, line)| *line == end)
        .map_or_else(|| panic!("no `{end}` after `{start}`"), |(at, _)| at);
    &rest[..to]
}

/// The identifier at the start of `text`.
fn ident(text: &str) -> &str {
    let end = text
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    &text[..end]
}

/// The library's kinds (see the module's docs).
fn library_kinds() -> BTreeSet<String> {
    let src = root().join("crates/core/src");
    let module = block(&read(&src.join("lib.rs")), "pub mod kind {", "}").to_owned();
    let exported: BTreeSet<&str> = module
        .lines()
        .filter_map(|line| line.trim().strip_prefix("pub use "))
        .flat_map(|path| {
            let names = path.rsplit("::").next().expect("a path");
            names.trim_matches(|c| "{};".contains(c)).split(',')
        })
        .map(str::trim)
        .collect();
    let mut handle_kinds = BTreeSet::new();
    for file in rust_files(&src) {
        for line in read(&file).lines().map(str::trim) {
            let kind = if let Some(alias) = line.strip_prefix("pub type ") {
                // `pub type X = path::Lock<K>;`
                alias
                    .split_once('=')
                    .and_then(|(_, ty)| ty.trim().strip_suffix(">;"))
                    .and_then(|ty| ty.split_once('<'))
                    .filter(|(path, _)| path.rsplit("::").next() == Some("Lock"))
                    .map(|(_, kind)| kind)
            } else if let Some(params) = line.strip_prefix("pub struct Lock<") {
                params.split_once(" = ").map(|(_, kind)| ident(kind))
            } else {
                None
            };
            handle_kinds.extend(kind.map(str::to_owned));
        }
    }
    let kinds: BTreeSet<String> = handle_kinds
        .into_iter()
        .filter(|kind| exported.contains(kind.as_str()))
        .collect();
    assert!(
        kinds.len() >= 8,
        "the kinds read from crates/core/src are too few to be right: {kinds:?}"
    );
    kinds
}

/// A row of `lock_kinds!`: the kind's name in tests, its variant and its emulator object.
#[derive(Debug)]
struct Row {
    name: String,
    variant: String,
    object: String,
}

/// The rows of `lock_kinds!` in `tests/src/kinds.rs`.
fn test_kinds() -> Vec<Row> {
    let text = read(&root().join("tests/src/kinds.rs"));
    let list = block(&text, "macro_rules! lock_kinds {", "}");
    list.lines()
        .filter_map(|line| {
            // `name: Variant($crate::redisson::Object),`
            let (name, rest) = line.trim().split_once(": ")?;
            let (variant, object) = rest.strip_suffix("),")?.split_once('(')?;
            let object = object.strip_prefix("$crate::redisson::")?;
            Some(Row {
                name: name.to_owned(),
                variant: variant.to_owned(),
                object: object.to_owned(),
            })
        })
        .collect()
}

/// The variants of the CLI's `--kind` (`enum LockKindArg`).
fn cli_kinds() -> BTreeSet<String> {
    let text = read(&root().join("crates/cli/src/kinds.rs"));
    block(&text, "pub(crate) enum LockKindArg {", "}")
        .lines()
        .skip(1)
        .map(str::trim)
        .filter(|line| !line.starts_with("///") && !line.starts_with("#["))
        .filter_map(|line| line.strip_suffix(','))
        .map(str::to_owned)
        .collect()
}

/// The kinds that `skip { ... }` and `ignore { ... }` sections name in the tests' sources, with
/// where.
fn skipped_and_ignored() -> Vec<(String, PathBuf)> {
    let mut named = Vec::new();
    for file in rust_files(&root().join("tests/tests")) {
        let text = read(&file);
        let sections = text
            .match_indices("skip {")
            .chain(text.match_indices("ignore {"));
        for (at, opening) in sections {
            let body = &text[at + opening.len()..];
            let body = &body[..body.find('}').expect("a section ends")];
            for entry in body.split('\n').map(str::trim) {
                if let Some((kind, _reason)) = entry.split_once(": \"") {
                    named.push((kind.to_owned(), file.clone()));
                }
            }
        }
    }
    named
}

#[test]
fn every_kind_of_the_library_is_in_the_tests_list() {
    let kinds = library_kinds();
    let rows = test_kinds();
    let objects: BTreeSet<String> = rows.iter().map(|row| row.object.clone()).collect();
    let expected: BTreeSet<String> = kinds.iter().map(|kind| format!("{kind}Kind")).collect();
    assert_eq!(
        objects, expected,
        "lock_kinds! (tests/src/kinds.rs) must have a row `name: Variant(<Kind>Kind)` for each kind \
         of the library, and no other: {rows:?}"
    );
}

#[test]
fn every_kind_of_the_tests_list_is_a_kind_of_the_cli() {
    let variants: BTreeSet<String> = test_kinds().into_iter().map(|row| row.variant).collect();
    assert_eq!(
        cli_kinds(),
        variants,
        "the CLI's --kind (LockKindArg, crates/cli/src/kinds.rs) must have a variant for each row \
         of lock_kinds! (tests/src/kinds.rs), named as the row's variant"
    );
}

#[test]
fn every_kind_has_its_lost_reply_cases() {
    let text = read(&root().join("tests/tests/lost_replies.rs"));
    let cases = block(&text, "const CASES: &[(&str, Case)] = cases![", "];");
    let missing: Vec<String> = test_kinds()
        .into_iter()
        .map(|row| row.name)
        .filter(|name| !cases.contains(&format!("\"{name}.")))
        .collect();
    assert!(
        missing.is_empty(),
        "no lost-reply case `<kind>.<script>` in tests/tests/lost_replies.rs for {missing:?}"
    );
}

#[test]
fn every_skipped_or_ignored_kind_is_a_kind_of_the_tests_list() {
    let names: BTreeSet<String> = test_kinds().into_iter().map(|row| row.name).collect();
    let named = skipped_and_ignored();
    assert!(!named.is_empty(), "no skip or ignore section found");
    let unknown: Vec<_> = named
        .iter()
        .filter(|(kind, _)| !names.contains(kind))
        .collect();
    assert!(
        unknown.is_empty(),
        "skips and ignores of kinds that lock_kinds! does not have: {unknown:?}"
    );
}
