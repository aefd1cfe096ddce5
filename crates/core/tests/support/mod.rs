//! What the API tests share: the crate's public inherent methods, read from its sources.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Public inherent methods by type, from the `.rs` files under `dir` (recursively), skipping the
/// directory `skip`.
pub(crate) fn methods(dir: &Path, skip: Option<&str>) -> BTreeMap<String, BTreeSet<String>> {
    let mut found: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut files = vec![dir.to_path_buf()];
    while let Some(path) = files.pop() {
        if path.is_dir() {
            if skip.is_some_and(|skip| path.file_name().is_some_and(|name| name == skip)) {
                continue;
            }
            let entries = std::fs::read_dir(&path).expect("read_dir");
            files.extend(entries.map(|entry| entry.expect("entry").path()));
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            let text = std::fs::read_to_string(&path).expect("read");
            for (ty, method) in inherent_methods(&text) {
                found.entry(ty).or_default().insert(method);
            }
        }
    }
    found
}

/// `(type, method)` for every `pub fn` / `pub async fn` of a top-level inherent `impl` block, but
/// deprecated methods and test modules.
fn inherent_methods(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut current: Option<String> = None;
    let mut deprecated = false;
    for line in text.lines() {
        if line.starts_with("#[cfg(test)]") {
            break;
        }
        if line.starts_with("impl") {
            current = impl_type(line);
            continue;
        }
        if line.starts_with('}') {
            current = None;
            continue;
        }
        let Some(ty) = &current else { continue };
        let trimmed = line.trim_start();
        if trimmed.starts_with("#[deprecated") {
            deprecated = true;
            continue;
        }
        let indent = line.len() - trimmed.len();
        let signature = trimmed
            .strip_prefix("pub async fn ")
            .or_else(|| trimmed.strip_prefix("pub fn "));
        if let (4, Some(signature)) = (indent, signature) {
            let name: String = signature
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !deprecated {
                out.push((ty.clone(), name));
            }
        }
        // An item at the impl's level ends what a `#[deprecated(...)]` above it applied to.
        if indent == 4 && (trimmed.starts_with("pub") || trimmed.starts_with("fn ")) {
            deprecated = false;
        }
    }
    out
}

/// The type of an inherent `impl` header (`impl<K: LockKind> Lock<K> {` → `Lock`); `None` for a
/// trait impl (`impl X for Y`).
fn impl_type(header: &str) -> Option<String> {
    let header = header.trim_end_matches('{').trim();
    if header.contains(" for ") {
        return None;
    }
    // Skip the impl's own generics, then take the type path's last segment.
    let mut rest = header.strip_prefix("impl")?;
    if rest.starts_with('<') {
        let mut depth = 0;
        let end = rest.char_indices().find_map(|(i, c)| {
            match c {
                '<' => depth += 1,
                '>' => depth -= 1,
                _ => {}
            }
            (depth == 0).then_some(i)
        })?;
        rest = &rest[end + 1..];
    }
    let path = rest.trim().split('<').next()?.trim();
    path.rsplit("::").next().map(str::to_owned)
}

#[test]
fn impl_headers_name_their_type() {
    assert_eq!(
        impl_type("impl<K: LockKind> Lock<K> {").as_deref(),
        Some("Lock")
    );
    assert_eq!(
        impl_type("impl Lock<crate::kind::Fenced> {").as_deref(),
        Some("Lock")
    );
    assert_eq!(
        impl_type("impl<T: fmt::Debug + Send + 'static> Guard<T> {").as_deref(),
        Some("Guard")
    );
    assert_eq!(impl_type("impl Semaphore {").as_deref(), Some("Semaphore"));
    assert_eq!(impl_type("impl<K: LockKind> Clone for Lock<K> {"), None);
}
