//! The blocking API is the async API without `.await`: every public method of an async type has a
//! blocking twin of the same name on the blocking type of the same name, and the other way round.
//! Read from the sources (each `impl` block's `pub fn` / `pub async fn`, deprecated ones aside), so
//! a method added on one side only fails here rather than in a user's port.

mod support;

use std::path::Path;

use support::methods;

/// Methods one side has on purpose, with the reason; nothing else may differ.
const ONE_SIDED: &[(&str, &str, &str)] = &[
    (
        "Client",
        "as_async",
        "blocking only: the async client behind it, for code that mixes both",
    ),
    (
        "Lock",
        "listen",
        "async only: a ChannelListener lives on the async client's subscriber and its wait is a \
         future; blocking code reaches it through `Client::as_async`",
    ),
];

#[test]
fn the_blocking_api_has_the_async_apis_method_names() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let asynchronous = methods(&src, Some("blocking"));
    let blocking = methods(&src.join("blocking"), None);
    let allowed =
        |ty: &str, method: &str| ONE_SIDED.iter().any(|(t, m, _)| *t == ty && *m == method);
    let mut differences = Vec::new();
    for (ty, blocking_methods) in &blocking {
        let Some(async_methods) = asynchronous.get(ty) else {
            differences.push(format!("blocking::{ty} has no async type of that name"));
            continue;
        };
        for method in async_methods.difference(blocking_methods) {
            if !allowed(ty, method) {
                differences.push(format!("{ty}::{method} is async only"));
            }
        }
        for method in blocking_methods.difference(async_methods) {
            if !allowed(ty, method) {
                differences.push(format!("{ty}::{method} is blocking only"));
            }
        }
    }
    assert!(
        differences.is_empty(),
        "the async and blocking APIs differ:\n  {}",
        differences.join("\n  ")
    );
}
