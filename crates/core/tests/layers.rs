//! The crate's source files import each other one way only (kinds → engine → services →
//! connection), read from the sources, so an import circle fails the build's tests rather than a
//! review.
//!
//! Every file under `src/` is a node, `lib.rs` and each `mod.rs` included. An edge is any path its
//! code names (not its comments, strings or `#[cfg(test)]` items): `use` trees (groups, `self`,
//! globs, renames, any visibility) and paths in expressions and types, whether they start at
//! `crate::`, `super::`, `self::` or at a child module. A path leads to the file of the deepest
//! module it names: `crate::engine::Patience` to `engine/mod.rs` (which defines or re-exports
//! `Patience`), `crate::engine` to `engine/mod.rs`, `super::lock_wire::Attempt` (from
//! `engine/acquire.rs`) to `engine/lock_wire.rs`; an inline module (`mod x { … }`) is part of its
//! file. So a re-export (`pub use x::Y`) is an edge from the file that re-exports to `x`'s file,
//! and a file that imports through a re-export depends on the file that re-exports. Declaring a
//! module (`mod x;`) is not an edge.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;

#[derive(Clone, Debug, PartialEq, Eq)]
enum Token {
    Ident(String),
    Punct(char),
}

impl Token {
    fn is(&self, c: char) -> bool {
        *self == Self::Punct(c)
    }

    fn ident(&self) -> Option<&str> {
        match self {
            Self::Ident(name) => Some(name),
            Self::Punct(_) => None,
        }
    }
}

/// The code's tokens, each with its line: comments, string and character literals and lifetimes'
/// quotes dropped; numbers come out as identifiers, which no path starts with.
fn lex(text: &str) -> Vec<(Token, usize)> {
    let chars: Vec<char> = text.chars().collect();
    let at = |i: usize| chars.get(i).copied().unwrap_or('\0');
    let mut tokens = Vec::new();
    let mut line = 1;
    let mut i = 0;
    // Skips to just after the closing quote of a string whose text starts at `i`, counting lines.
    let string_end = |mut i: usize, line: &mut usize| {
        while i < chars.len() && chars[i] != '"' {
            if chars[i] == '\\' {
                i += 1;
            }
            if at(i) == '\n' {
                *line += 1;
            }
            i += 1;
        }
        i + 1
    };
    while i < chars.len() {
        let c = chars[i];
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c == '/' && at(i + 1) == '/' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && at(i + 1) == '*' {
            let mut nesting = 1;
            i += 2;
            while i < chars.len() && nesting > 0 {
                match (chars[i], at(i + 1)) {
                    ('/', '*') => {
                        nesting += 1;
                        i += 1;
                    }
                    ('*', '/') => {
                        nesting -= 1;
                        i += 1;
                    }
                    ('\n', _) => line += 1,
                    _ => {}
                }
                i += 1;
            }
        } else if c == '"' {
            i = string_end(i + 1, &mut line);
        } else if c == '\'' {
            if at(i + 1) == '\\' {
                i += 3;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if at(i + 2) == '\'' {
                i += 3;
            } else {
                // A lifetime: its name follows as an identifier.
                i += 1;
            }
        } else if c.is_alphanumeric() || c == '_' {
            // Raw strings (`r"…"`, `r#"…"#`, `br"…"`), byte strings and byte characters.
            let mut j = i + usize::from(c == 'b');
            if at(j) == 'r' && (at(j + 1) == '"' || at(j + 1) == '#') {
                let hashes = chars[j + 1..].iter().take_while(|&&h| h == '#').count();
                if at(j + 1 + hashes) == '"' {
                    j += 2 + hashes;
                    loop {
                        if j >= chars.len() {
                            break;
                        }
                        if chars[j] == '\n' {
                            line += 1;
                        }
                        if chars[j] == '"' && chars[j + 1..].iter().take(hashes).all(|&h| h == '#')
                        {
                            j += 1 + hashes;
                            break;
                        }
                        j += 1;
                    }
                    i = j;
                    continue;
                }
            }
            if c == 'b' && at(i + 1) == '"' {
                i = string_end(i + 2, &mut line);
                continue;
            }
            if c == 'b' && at(i + 1) == '\'' {
                i += 1;
                continue;
            }
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            tokens.push((Token::Ident(chars[start..i].iter().collect()), line));
        } else {
            tokens.push((Token::Punct(c), line));
            i += 1;
        }
    }
    tokens
}

/// A path that a file's code names.
#[derive(Debug)]
struct Reference {
    /// The module the path is written in (a file's, or an inline module's).
    module: Vec<String>,
    /// Its segments, `crate` / `super` / `self` included.
    path: Vec<String>,
    line: usize,
}

#[derive(Debug, Default)]
struct Parsed {
    /// The inline modules (`mod x { … }`) the file defines, by their full paths.
    inline_modules: Vec<Vec<String>>,
    references: Vec<Reference>,
}

/// The end of the bracketed group that opens at `i` (just after its closer).
fn group_end(tokens: &[(Token, usize)], i: usize) -> usize {
    let mut nesting = 0usize;
    for (j, (token, _)) in tokens.iter().enumerate().skip(i) {
        if token.is('(') || token.is('[') || token.is('{') {
            nesting += 1;
        } else if token.is(')') || token.is(']') || token.is('}') {
            nesting -= 1;
            if nesting == 0 {
                return j + 1;
            }
        }
    }
    tokens.len()
}

/// The end of the item that starts at `i` (attributes included): after its `;` or its block, or
/// at the end of the block it is in.
fn item_end(tokens: &[(Token, usize)], mut i: usize) -> usize {
    while i < tokens.len() {
        let token = &tokens[i].0;
        if token.is('}') {
            return i;
        }
        if token.is(';') {
            return i + 1;
        }
        if token.is('{') {
            return group_end(tokens, i);
        }
        if token.is('(') || token.is('[') {
            i = group_end(tokens, i);
        } else {
            i += 1;
        }
    }
    i
}

/// The leaves of the `use` tree that starts at `i`, each as a full path; `i` ends after the tree.
fn use_tree(
    tokens: &[(Token, usize)],
    i: &mut usize,
    mut path: Vec<String>,
    leaves: &mut Vec<Vec<String>>,
) {
    while let Some((token, _)) = tokens.get(*i) {
        *i += 1;
        if token.is(':') {
            continue;
        }
        if token.is('*') {
            break;
        }
        if token.is('{') {
            while tokens.get(*i).is_some_and(|(t, _)| !t.is('}')) {
                use_tree(tokens, i, path.clone(), leaves);
                if tokens.get(*i).is_some_and(|(t, _)| t.is(',')) {
                    *i += 1;
                }
            }
            *i += 1;
            return;
        }
        let Some(name) = token.ident() else { break };
        path.push(name.to_owned());
        let next = tokens.get(*i).map(|(t, _)| t);
        if next.is_some_and(|t| t.is(':')) {
            continue;
        }
        if next.and_then(Token::ident) == Some("as") {
            *i += 2;
        }
        break;
    }
    if path.len() > 1 && path.last().is_some_and(|last| last == "self") {
        let _ = path.pop();
    }
    leaves.push(path);
}

/// The inline modules and the paths of one file, whose module is `module`.
fn parse(module: &[String], text: &str) -> Parsed {
    let tokens = lex(text);
    let mut parsed = Parsed::default();
    // The module each open inline module's block belongs to, with the brace depth it opened at.
    let mut modules: Vec<(Vec<String>, usize)> = vec![(module.to_vec(), 0)];
    let mut depth = 0usize;
    let mut i = 0;
    while i < tokens.len() {
        let (token, line) = (&tokens[i].0, tokens[i].1);
        let here = modules.last().map(|(m, _)| m.clone()).unwrap_or_default();
        let next = |k: usize| tokens.get(i + k).map(|(t, _)| t);
        if token.is('#')
            && (next(1).is_some_and(|t| t.is('[')) || next(2).is_some_and(|t| t.is('[')))
        {
            let open = if next(1).is_some_and(|t| t.is('!')) {
                i + 2
            } else {
                i + 1
            };
            let end = group_end(&tokens, open);
            let inside: Vec<&Token> = tokens[open..end].iter().map(|(t, _)| t).collect();
            let cfg_test = [
                Token::Punct('['),
                Token::Ident("cfg".into()),
                Token::Punct('('),
                Token::Ident("test".into()),
                Token::Punct(')'),
                Token::Punct(']'),
            ];
            i = if inside.iter().copied().eq(cfg_test.iter()) {
                item_end(&tokens, end)
            } else {
                end
            };
            continue;
        }
        match token {
            Token::Punct('{') => depth += 1,
            Token::Punct('}') => {
                depth -= 1;
                if modules.len() > 1 && modules.last().is_some_and(|(_, at)| *at == depth) {
                    let _ = modules.pop();
                }
            }
            Token::Ident(word) if word == "mod" => {
                if let (Some(Token::Ident(name)), Some(brace)) = (next(1), next(2))
                    && brace.is('{')
                {
                    let mut inline = here.clone();
                    inline.push(name.clone());
                    parsed.inline_modules.push(inline.clone());
                    modules.push((inline, depth));
                    i += 2;
                    continue;
                }
            }
            Token::Ident(word) if word == "use" => {
                i += 1;
                let mut leaves = Vec::new();
                use_tree(&tokens, &mut i, Vec::new(), &mut leaves);
                for path in leaves {
                    parsed.references.push(Reference {
                        module: here.clone(),
                        path,
                        line,
                    });
                }
                continue;
            }
            Token::Ident(first)
                if next(1).is_some_and(|t| t.is(':'))
                    && next(2).is_some_and(|t| t.is(':'))
                    && !(i > 0 && tokens[i - 1].0.is(':')) =>
            {
                let mut path = vec![first.clone()];
                i += 1;
                while tokens.get(i).is_some_and(|(t, _)| t.is(':'))
                    && tokens.get(i + 1).is_some_and(|(t, _)| t.is(':'))
                {
                    let Some(name) = tokens.get(i + 2).and_then(|(t, _)| t.ident()) else {
                        break;
                    };
                    path.push(name.to_owned());
                    i += 3;
                }
                parsed.references.push(Reference {
                    module: here,
                    path,
                    line,
                });
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    parsed
}

/// The file of the deepest module that `path` (written in `module`) names; `None` for a path
/// outside the crate.
fn resolve(
    modules: &BTreeMap<Vec<String>, String>,
    module: &[String],
    path: &[String],
) -> Option<String> {
    let mut segments = path.iter().map(String::as_str).peekable();
    let mut at: Vec<String> = match segments.next()? {
        "crate" => Vec::new(),
        "self" => module.to_vec(),
        "super" => {
            let mut at = module.to_vec();
            let _ = at.pop();
            while segments.next_if_eq(&"super").is_some() {
                let _ = at.pop();
            }
            at
        }
        child => {
            let mut at = module.to_vec();
            at.push(child.to_owned());
            if !modules.contains_key(&at) {
                return None;
            }
            at
        }
    };
    for segment in segments {
        at.push(segment.to_owned());
        if !modules.contains_key(&at) {
            let _ = at.pop();
            break;
        }
    }
    modules.get(&at).cloned()
}

/// Where an edge comes from: the first line of the importing file that names the other, and how.
type Evidence = (usize, String);

/// File (relative to `src/`) → the files it imports from, each with its evidence.
type Graph = BTreeMap<String, BTreeMap<String, Evidence>>;

/// The module a file (a path relative to `src/`, `/`-separated) is, by its segments.
fn file_module(file: &str) -> Vec<String> {
    let mut segments: Vec<String> = file
        .trim_end_matches(".rs")
        .split('/')
        .map(str::to_owned)
        .collect();
    if segments
        .last()
        .is_some_and(|last| last == "mod" || (last == "lib" && segments.len() == 1))
    {
        let _ = segments.pop();
    }
    segments
}

/// The file graph of the given sources (file → text).
fn graph(files: &BTreeMap<String, String>) -> Graph {
    let parsed: BTreeMap<&String, Parsed> = files
        .iter()
        .map(|(file, text)| (file, parse(&file_module(file), text)))
        .collect();
    let mut modules: BTreeMap<Vec<String>, String> = BTreeMap::new();
    for (file, parsed) in &parsed {
        let _ = modules.insert(file_module(file), (*file).clone());
        for inline in &parsed.inline_modules {
            let _ = modules.insert(inline.clone(), (*file).clone());
        }
    }
    let mut graph = Graph::new();
    for (file, parsed) in parsed {
        let deps = graph.entry(file.clone()).or_default();
        for reference in &parsed.references {
            if let Some(dep) = resolve(&modules, &reference.module, &reference.path)
                && dep != *file
            {
                let _ = deps
                    .entry(dep)
                    .or_insert_with(|| (reference.line, reference.path.join("::")));
            }
        }
    }
    graph
}

/// Every source file under `src/`, by its path relative to `src/`.
fn sources() -> BTreeMap<String, String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = BTreeMap::new();
    let mut dirs = vec![src.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("read src") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let relative = path.strip_prefix(&src).expect("under src");
                let name = relative
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy())
                    .collect::<Vec<_>>()
                    .join("/");
                let _ = files.insert(
                    name,
                    std::fs::read_to_string(&path).expect("read a source file"),
                );
            }
        }
    }
    files
}

/// Every elementary circle of `graph`, each from its smallest file back to it.
fn circles(graph: &Graph) -> Vec<Vec<String>> {
    fn walk<'a>(
        graph: &'a Graph,
        start: &'a str,
        path: &mut Vec<&'a str>,
        found: &mut Vec<Vec<String>>,
    ) {
        let last = *path.last().expect("a path starts somewhere");
        for dep in graph.get(last).into_iter().flat_map(BTreeMap::keys) {
            if dep == start {
                let mut circle: Vec<String> = path.iter().map(|&f| f.to_owned()).collect();
                circle.push(start.to_owned());
                found.push(circle);
            } else if dep.as_str() > start && !path.contains(&dep.as_str()) {
                path.push(dep);
                walk(graph, start, path, found);
                let _ = path.pop();
            }
        }
    }
    let mut found = Vec::new();
    for start in graph.keys() {
        walk(graph, start, &mut vec![start.as_str()], &mut found);
    }
    found
}

/// The circles of `graph`, one a line, then the import behind each of their edges.
fn report(graph: &Graph, circles: &[Vec<String>]) -> String {
    let mut text = format!(
        "{} import circle(s) between files of src/:\n",
        circles.len()
    );
    let mut edges = BTreeSet::new();
    for circle in circles {
        let _ = writeln!(text, "  {}", circle.join(" → "));
        edges.extend(circle.windows(2).map(|w| (w[0].clone(), w[1].clone())));
    }
    text.push_str("their edges:\n");
    for (from, to) in edges {
        let (line, path) = &graph[&from][&to];
        let _ = writeln!(text, "  {from} → {to}: {from}:{line} names {path}");
    }
    text
}

#[test]
fn source_files_import_each_other_one_way() {
    let graph = graph(&sources());
    assert!(
        graph.contains_key("lib.rs") && graph.contains_key("engine/mod.rs"),
        "{graph:?}"
    );
    assert!(
        graph["locks/lock.rs"]
            .keys()
            .any(|dep| dep.starts_with("engine/")),
        "{graph:?}"
    );
    let circles = circles(&graph);
    assert!(circles.is_empty(), "{}", report(&graph, &circles));
}

/// The parser on a small crate of every form it reads.
#[test]
fn every_form_of_import_is_an_edge() {
    let files: BTreeMap<String, String> = [
        ("lib.rs", "mod a; mod b;\npub mod kind {\n    pub use crate::b::K;\n}\npub use a::A;\n"),
        ("a/mod.rs", "//! crate::b::Doc\nmod x;\nmod y;\npub(crate) use x::X;\n"),
        (
            "a/x.rs",
            "use super::{\n    y::{self, Y},\n    Other as _,\n};\nconst S: &str = \"crate::c::Q\";\nfn f<'a>() -> char { 'c' }\n",
        ),
        ("a/y.rs", "#[cfg(test)]\nmod tests {\n    use crate::c::T;\n}\nfn g() { crate::c::f(); }\n"),
        ("b.rs", "pub(crate) use crate::kind::Z;\nfn h() -> crate::a::A { loop {} }\n"),
        ("c.rs", "use self::inner::I;\nmod inner { pub(super) use super::super::b::B; }\n"),
    ]
    .into_iter()
    .map(|(file, text)| (file.to_owned(), text.to_owned()))
    .collect();
    let graph = graph(&files);
    let deps = |file: &str| graph[file].keys().cloned().collect::<Vec<_>>();
    assert_eq!(deps("lib.rs"), ["a/mod.rs", "b.rs"]);
    assert_eq!(deps("a/mod.rs"), ["a/x.rs"]);
    assert_eq!(deps("a/x.rs"), ["a/mod.rs", "a/y.rs"]);
    assert_eq!(deps("a/y.rs"), ["c.rs"]);
    assert_eq!(deps("b.rs"), ["a/mod.rs", "lib.rs"]);
    assert_eq!(deps("c.rs"), ["b.rs"]);
    let circles = circles(&graph);
    assert_eq!(
        circles,
        [
            vec!["a/mod.rs", "a/x.rs", "a/mod.rs"],
            vec!["a/mod.rs", "a/x.rs", "a/y.rs", "c.rs", "b.rs", "a/mod.rs"],
            vec![
                "a/mod.rs", "a/x.rs", "a/y.rs", "c.rs", "b.rs", "lib.rs", "a/mod.rs"
            ],
            vec!["b.rs", "lib.rs", "b.rs"],
        ]
    );
    let report = report(&graph, &circles);
    assert!(
        report.contains("b.rs → lib.rs: b.rs:1 names crate::kind::Z"),
        "{report}"
    );
}

/// The modules above the engine: the crate root, the client and its blocking facade, the lock kinds
/// and the synchronizers. Every other file of `src/` (the engine and the services below it, and any
/// file added later) is checked by default: it knows no lock kind, no handle and no client, so a
/// new kind is a new file above them. (Each is a file of `src/` or a directory's files.)
const UPPER: [&str; 6] = [
    "lib",
    "client",
    "entries",
    "blocking",
    "locks",
    "synchronizers",
];

/// The top-level module a file belongs to (`lib` for `lib.rs`).
fn top_module(file: &str) -> &str {
    file.split('/')
        .next()
        .unwrap_or(file)
        .trim_end_matches(".rs")
}

#[test]
fn the_engine_and_services_know_no_kind_and_no_client() {
    let graph = graph(&sources());
    for upper in UPPER {
        assert!(
            graph.keys().any(|file| top_module(file) == upper),
            "no file for the upper module {upper}"
        );
    }
    let lower: Vec<_> = graph
        .iter()
        .filter(|(file, _)| !UPPER.contains(&top_module(file)))
        .collect();
    assert!(
        lower.iter().any(|(file, _)| file.starts_with("engine/")),
        "{graph:?}"
    );
    for (file, deps) in lower {
        for (dep, (line, path)) in deps {
            assert!(
                !UPPER.contains(&top_module(dep)),
                "{file}:{line} imports {dep} ({path}): only the upper modules {UPPER:?} may"
            );
        }
    }
}
