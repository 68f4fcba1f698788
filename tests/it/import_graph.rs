//! The layers of `src/`, checked: every `crate::` path in the library's code must point at a
//! top-level module in the same layer or one below it, so no import circle between top-level
//! modules can come back. A module's own unit tests (`#[cfg(test)]`) are not counted: a test
//! may reach up to check what a higher layer makes of its value (the wire form of an error).
//!
//! Run `cargo test --test it import_graph -- --nocapture` to print the graph, with the count of
//! files behind each edge; `ATC_IMPORT_GRAPH_SRC=<dir>` points it at another tree's `src/`
//! (an older checkout, to count what it had).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The top-level modules of `src/`, bottom layer first. A module may use those before it
/// (and itself); one that is not listed fails the check until it is placed here.
const LAYERS: &[&str] = &[
    // Leaves: the time of day, counters, and the strict reading of requests.
    "clock",
    "metrics",
    "protocol",
    // What is configured, and what an agent is.
    "config",
    "agents",
    // Where processes run: the local and imp wings, the refusal chain.
    "providers",
    // Each agent's own copy of a repository, made with git and recorded by the store.
    "workspaces",
    // SQLite.
    "store",
    // What sessions ask their users, then the sessions themselves.
    "permissions",
    "sessions",
    // The idempotency ledger runs spawns through the sessions.
    "ledger",
    // The HTTP and WebSocket front, where every module's error gets its wire form.
    "server",
    "daemon",
    // The `atc` client commands.
    "cli",
];

/// One `crate::` reference: from a file, to a top-level module.
struct Edge {
    from: String,
    to: String,
    file: PathBuf,
}

#[test]
fn no_import_runs_up_a_layer_of_src() {
    let root = std::env::var_os("ATC_IMPORT_GRAPH_SRC")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    let edges = edges(&root);
    let graph = graph(&edges);
    print_graph(&graph);

    let rank = |m: &str| LAYERS.iter().position(|l| *l == m);
    let mut problems = Vec::new();
    let mut modules: BTreeSet<&str> = BTreeSet::new();
    for e in &edges {
        modules.insert(&e.from);
        modules.insert(&e.to);
    }
    for m in &modules {
        if rank(m).is_none() {
            problems.push(format!(
                "top-level module `{m}` has no layer: place it in LAYERS ({})",
                file!()
            ));
        }
    }
    for e in &edges {
        if let (Some(from), Some(to)) = (rank(&e.from), rank(&e.to)) {
            if to > from {
                problems.push(format!(
                    "{} (layer `{}`) uses `crate::{}`, a layer above it",
                    e.file.display(),
                    e.from,
                    e.to
                ));
            }
        }
    }
    let circles = circles(&graph);
    for c in &circles {
        problems.push(format!("import circle between top-level modules: {c:?}"));
    }
    problems.sort();
    problems.dedup();
    assert!(
        problems.is_empty(),
        "the layers of src/ are broken:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_scanner_sees_grouped_paths_and_skips_comments_and_tests() {
    let text =
        "use crate::{a::X, b, self};\n// crate::c\n/* crate::d */\nfn f() { crate::e::g(); }\n\
                #[cfg(test)]\nmod tests { use crate::h; }\n#[cfg(test)]\nuse crate::i;\n";
    let refs = references(&strip(text));
    assert_eq!(
        refs,
        ["a", "b", "e"].map(String::from).into_iter().collect()
    );
    let g = BTreeMap::from([
        ("a".to_string(), BTreeMap::from([("b".to_string(), 1)])),
        ("b".to_string(), BTreeMap::from([("a".to_string(), 1)])),
        ("c".to_string(), BTreeMap::from([("a".to_string(), 1)])),
    ]);
    assert_eq!(circles(&g), vec![vec!["a".to_string(), "b".to_string()]]);
}

/// Every `crate::` edge between two top-level modules, from the library's non-test code.
fn edges(root: &Path) -> Vec<Edge> {
    let mut files = Vec::new();
    collect(root, &mut files);
    let test_only = test_only_files(&files);
    let mut edges = Vec::new();
    for file in files {
        if test_only.contains(&file) {
            continue;
        }
        let rel = file.strip_prefix(root).expect("under src");
        let mut parts = rel.components();
        let first = parts.next().expect("a path").as_os_str().to_string_lossy();
        let from = match parts.next() {
            Some(_) => first.to_string(),
            None => first.trim_end_matches(".rs").to_string(),
        };
        if from == "lib" || from == "main" {
            continue;
        }
        let text = std::fs::read_to_string(&file).expect("readable source");
        for to in references(&strip(&text)) {
            if to != from {
                edges.push(Edge {
                    from: from.clone(),
                    to,
                    file: rel.to_path_buf(),
                });
            }
        }
    }
    edges
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("readable dir")
        .map(|e| e.expect("dir entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            collect(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Files that are whole test modules: declared as `#[cfg(test)] mod name;`.
fn test_only_files(files: &[PathBuf]) -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    for file in files {
        let text = std::fs::read_to_string(file).expect("readable source");
        let dir = match file.file_name().and_then(|n| n.to_str()) {
            Some("mod.rs") | Some("lib.rs") => file.parent().expect("a dir").to_path_buf(),
            _ => file.with_extension(""),
        };
        let mut rest = text.as_str();
        while let Some(at) = rest.find("#[cfg(test)]") {
            rest = &rest[at + "#[cfg(test)]".len()..];
            let item = rest.trim_start();
            let Some(decl) = item.strip_prefix("mod ") else {
                continue;
            };
            let name: String = decl
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if decl[name.len()..].trim_start().starts_with(';') {
                let parent = if dir == file.with_extension("") {
                    file.parent().expect("a dir").to_path_buf()
                } else {
                    dir.clone()
                };
                out.insert(parent.join(format!("{name}.rs")));
                out.insert(dir.join(format!("{name}.rs")));
                out.insert(dir.join(&name).join("mod.rs"));
            }
        }
    }
    out
}

/// `text` without comments, string-free enough for path scanning, and without the items
/// that `#[cfg(test)]` guards.
fn strip(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
            let mut depth = 0;
            while i < b.len() {
                if b[i..].starts_with(b"/*") {
                    depth += 1;
                    i += 2;
                } else if b[i..].starts_with(b"*/") {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if b[i..].starts_with(b"#[cfg(test)]") {
            i += "#[cfg(test)]".len();
            // Skip the guarded item: up to its `;`, or its balanced braces.
            let mut depth = 0;
            while i < b.len() {
                match b[i] {
                    b'{' => depth += 1,
                    b'}' => {
                        depth -= 1;
                        if depth == 0 {
                            i += 1;
                            break;
                        }
                    }
                    b';' if depth == 0 => {
                        i += 1;
                        break;
                    }
                    _ => {}
                }
                i += 1;
            }
        } else {
            out.push(b[i] as char);
            i += 1;
        }
    }
    out
}

/// The top-level modules `text` names through `crate::`, grouped imports included.
fn references(text: &str) -> BTreeSet<String> {
    let ident = |s: &str| -> String {
        s.trim_start()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let mut out = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().next_back();
        rest = &rest[at + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$' || c == ':') {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 1;
            let mut part = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    _ => {}
                }
                if depth == 0 || (depth == 1 && c == ',') {
                    let name = ident(&part);
                    if !name.is_empty() && name != "self" {
                        out.insert(name);
                    }
                    part.clear();
                    if depth == 0 {
                        break;
                    }
                } else if depth >= 1 {
                    part.push(c);
                }
            }
        } else {
            let name = ident(rest);
            if !name.is_empty() {
                out.insert(name);
            }
        }
    }
    out
}

/// Module → module → how many files make the edge.
fn graph(edges: &[Edge]) -> BTreeMap<String, BTreeMap<String, usize>> {
    let mut files: BTreeMap<(&str, &str), BTreeSet<&Path>> = BTreeMap::new();
    for e in edges {
        files.entry((&e.from, &e.to)).or_default().insert(&e.file);
    }
    let mut g: BTreeMap<String, BTreeMap<String, usize>> = BTreeMap::new();
    for ((from, to), f) in files {
        g.entry(from.to_string())
            .or_default()
            .insert(to.to_string(), f.len());
    }
    g
}

fn print_graph(g: &BTreeMap<String, BTreeMap<String, usize>>) {
    for (from, tos) in g {
        let tos: Vec<String> = tos.iter().map(|(t, n)| format!("{t}({n})")).collect();
        println!("{from} -> {}", tos.join(", "));
    }
}

/// The strongly connected parts of more than one module (Tarjan), each sorted.
fn circles(g: &BTreeMap<String, BTreeMap<String, usize>>) -> Vec<Vec<String>> {
    struct Walk<'a> {
        g: &'a BTreeMap<String, BTreeMap<String, usize>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, v: &'a str) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            self.on_stack.insert(v);
            if let Some(tos) = self.g.get(v) {
                for w in tos.keys() {
                    let w = w.as_str();
                    if !self.index.contains_key(w) {
                        self.visit(w);
                        let lw = self.low[w];
                        let lv = self.low.get_mut(v).expect("visited");
                        *lv = (*lv).min(lw);
                    } else if self.on_stack.contains(w) {
                        let iw = self.index[w];
                        let lv = self.low.get_mut(v).expect("visited");
                        *lv = (*lv).min(iw);
                    }
                }
            }
            if self.low[v] == self.index[v] {
                let mut part = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    part.push(w.to_string());
                    if w == v {
                        break;
                    }
                }
                if part.len() > 1 {
                    part.sort();
                    self.out.push(part);
                }
            }
        }
    }
    let mut walk = Walk {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in g.keys() {
        if !walk.index.contains_key(v.as_str()) {
            walk.visit(v);
        }
    }
    walk.out.sort();
    walk.out
}
