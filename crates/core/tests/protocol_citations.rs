//! Every section of the wire document that the repository cites exists.
//!
//! Code comments, Lua comments, READMEs, scripts and tests cite `docs/protocol.md` by section number
//! (`docs/protocol.md §2.3`, or a bare `§6.4` after such a citation). A section that is renumbered
//! or removed would leave those citations pointing nowhere, so this reads every text file of the
//! repository that may cite one and checks each cited number against the document's headings
//! (`## 2. …`, `### 2.3 …`). It reads files only: no Redis, no build of anything else.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The repository's root: this crate is `crates/core`.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// What is scanned: the directories (recursively) and single files that may cite the document
/// (`docs` too: the documents cite each other's sections, and the protocol its own).
const SCANNED: [&str; 7] = [
    "docs",
    "crates",
    "tests",
    "scripts",
    "benches",
    "examples",
    "README.md",
];

/// The kinds of text file that carry citations (source, Lua, docs, shell, manifests).
const EXTENSIONS: [&str; 7] = ["rs", "lua", "md", "sh", "toml", "yaml", "yml"];

/// The files under `path` to scan, skipping build output and hidden directories.
fn text_files(path: &Path, found: &mut Vec<PathBuf>) {
    if path.is_dir() {
        let name = path
            .file_name()
            .and_then(|name| name.to_str())
            .unwrap_or("");
        if name == "target" || name.starts_with('.') {
            return;
        }
        let mut entries: Vec<_> = std::fs::read_dir(path)
            .unwrap_or_else(|error| panic!("reading {}: {error}", path.display()))
            .map(|entry| entry.expect("a directory entry").path())
            .collect();
        entries.sort();
        for entry in entries {
            text_files(&entry, found);
        }
    } else if path
        .extension()
        .and_then(|extension| extension.to_str())
        .is_some_and(|extension| EXTENSIONS.contains(&extension))
    {
        found.push(path.to_path_buf());
    }
}

/// The section number that starts `text` (`2`, `6.4`, `11.15`), if any: digits, and more digits
/// after each dot. A dot that ends a sentence is not part of it.
fn section_number(text: &str) -> Option<&str> {
    let bytes = text.as_bytes();
    let mut end = 0;
    while end < bytes.len() && bytes[end].is_ascii_digit() {
        end += 1;
        if end + 1 < bytes.len() && bytes[end] == b'.' && bytes[end + 1].is_ascii_digit() {
            end += 1;
        }
    }
    (end > 0).then(|| &text[..end])
}

/// Every section number cited in `text` (as `§N`, `§ N`, which covers `docs/protocol.md §N` and the
/// bare form), with its line.
fn citations(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (index, line) in text.lines().enumerate() {
        for (at, _) in line.match_indices('§') {
            let after = line[at + '§'.len_utf8()..].trim_start_matches(' ');
            if let Some(number) = section_number(after) {
                found.push((index + 1, number.to_owned()));
            }
        }
    }
    found
}

/// The numbered headings of the document: `## 2. The reentrant lock` gives `2`, `### 2.3 Unlock`
/// gives `2.3`.
fn sections(document: &str) -> BTreeSet<String> {
    document
        .lines()
        .filter_map(|line| {
            let title = line.strip_prefix('#')?.trim_start_matches('#');
            section_number(title.strip_prefix(' ')?)
        })
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_cited_section_of_the_protocol_document_exists() {
    let root = root();
    let document = std::fs::read_to_string(root.join("docs/protocol.md"))
        .expect("docs/protocol.md exists at the repository's root");
    let sections = sections(&document);
    assert!(
        ["0", "2", "2.3", "6.9", "8.8", "11.10"]
            .iter()
            .all(|section| sections.contains(*section)),
        "the headings were not read: {sections:?}"
    );

    let mut files = Vec::new();
    for scanned in SCANNED {
        text_files(&root.join(scanned), &mut files);
    }
    // The old name of the document, which lived outside the repository; spelt in two halves so that
    // this file does not cite it.
    let old_name = ["PROTOCOL", ".md"].concat();
    let mut cited = 0;
    let mut missing = Vec::new();
    for file in &files {
        // Files that are not UTF-8 cite nothing.
        let Ok(text) = std::fs::read_to_string(file) else {
            continue;
        };
        let shown = file.strip_prefix(&root).unwrap_or(file).display();
        for (line, number) in citations(&text) {
            cited += 1;
            if !sections.contains(&number) {
                missing.push(format!("{shown}:{line} cites §{number}"));
            }
        }
        for (index, line) in text.lines().enumerate() {
            if line.contains(&old_name) {
                missing.push(format!("{shown}:{} cites {old_name}", index + 1));
            }
        }
    }
    assert!(
        cited > 100,
        "only {cited} citations found in {} files",
        files.len()
    );
    assert!(
        missing.is_empty(),
        "citations of sections docs/protocol.md does not have:\n  {}",
        missing.join("\n  ")
    );
}

#[test]
fn section_numbers_and_headings_are_read_as_written() {
    assert_eq!(section_number("2.3 steps"), Some("2.3"));
    assert_eq!(section_number("11.15."), Some("11.15"));
    assert_eq!(section_number("6."), Some("6"));
    assert_eq!(section_number("x"), None);
    assert_eq!(
        citations("see docs/protocol.md §2.3, §6–§8 and § 9.1.\nno section here"),
        [(1, "2.3"), (1, "6"), (1, "8"), (1, "9.1")].map(|(line, n)| (line, n.to_owned()))
    );
    let headings = sections("# Title\n## 0. General\n### 2.3 Unlock\n#### Note\n## Appendix A\n");
    assert_eq!(headings, BTreeSet::from(["0".to_owned(), "2.3".to_owned()]));
}
