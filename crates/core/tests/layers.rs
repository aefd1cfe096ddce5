//! The crate's modules import each other one way only (kinds → engine → services → connection):
//! read from the sources, so an import circle fails the build's tests rather than a review.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Module → the modules its code (not its docs, not its unit tests) names as `crate::<module>`.
fn imports() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut dirs = vec![src.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("read src") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            let relative = path.strip_prefix(&src).expect("under src");
            let module = relative
                .components()
                .next()
                .and_then(|c| c.as_os_str().to_str())
                .map(|name| name.trim_end_matches(".rs").to_owned())
                .expect("module name");
            if module == "lib" {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("read module");
            let code = text.split("#[cfg(test)]").next().unwrap_or_default();
            let deps = graph.entry(module.clone()).or_default();
            for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
                for (at, _) in line.match_indices("crate::") {
                    let name: String = line[at + "crate::".len()..]
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect();
                    if !name.is_empty() && name != module {
                        let _ = deps.insert(name);
                    }
                }
            }
        }
    }
    graph
}

/// A circle through `module`, if there is one.
fn circle(
    graph: &BTreeMap<String, BTreeSet<String>>,
    module: &str,
    path: &mut Vec<String>,
) -> Option<Vec<String>> {
    if let Some(start) = path.iter().position(|m| m == module) {
        let mut circle = path[start..].to_vec();
        circle.push(module.to_owned());
        return Some(circle);
    }
    path.push(module.to_owned());
    for dep in graph.get(module).into_iter().flatten() {
        if let Some(found) = circle(graph, dep, path) {
            return Some(found);
        }
    }
    let _ = path.pop();
    None
}

#[test]
fn module_imports_form_a_one_way_graph() {
    let graph = imports();
    assert!(graph.contains_key("engine") && graph.contains_key("lock"));
    for module in graph.keys() {
        if let Some(found) = circle(&graph, module, &mut Vec::new()) {
            panic!("import circle: {}", found.join(" → "));
        }
    }
}

/// The engine and the services below it: they know no lock kind, no handle and no client, so a
/// new kind is a new file above them.
const CORE: [&str; 14] = [
    "engine",
    "services",
    "reconciling",
    "cohort",
    "telemetry",
    "pubsub",
    "watchdog",
    "wake",
    "scripts",
    "connection",
    "config",
    "owner",
    "names",
    "error",
];

#[test]
fn the_engine_and_services_know_no_kind_and_no_client() {
    let graph = imports();
    for low in CORE {
        let deps = graph.get(low).expect("a core module");
        for dep in deps {
            assert!(CORE.contains(&dep.as_str()), "{low} imports {dep}");
        }
    }
}
