//! The layering rule of the crate tour (`lib.rs`), checked on the source: every `crate::` path
//! in code (comments and doc links excepted) must name a module of the same layer or of a
//! layer below, the modules of one layer must not import each other in a cycle, and every
//! top-level module must be placed in a layer. Runs with the unit tests, so CI fails on a new
//! upward import.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Layers from the bottom up, with their top-level modules.
const LAYERS: &[(&str, &[&str])] = &[
    (
        "base",
        &["error", "properties", "secrets", "fault", "operation"],
    ),
    ("storage", &["storage"]),
    ("table", &["table"]),
    ("catalog", &["catalog"]),
    ("commit", &["commit"]),
    // Leases, run history and ingest hand-offs in one SQL database (the SQL catalog's pool):
    // shared by `maintain` and `ingest`.
    ("coordination", &["coordination"]),
    ("write", &["write"]),
    (
        "operations",
        &[
            "alter", "refs", "compact", "change", "expire", "clean", "diagnose", "inspect", "sql",
        ],
    ),
    ("maintain", &["maintain"]),
    // Getting records in: `floe ingest` runs the table's maintenance (`--maintain`), so it
    // sits on top of the service; its group lease store (`--group`) is the coordination
    // layer's; `append` reads its input files with ingest's converters.
    ("ingest", &["ingest", "append"]),
];

/// The top-level modules a source file names through `crate::`, outside comments.
fn imports(src: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in src.lines() {
        let code = strip_comment(line);
        let mut rest = code;
        while let Some(i) = rest.find("crate::") {
            let after = &rest[i + "crate::".len()..];
            let name: String = after
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                out.insert(name);
            }
            rest = after;
        }
        // `use crate::{a, b::c}` names several modules at once.
        if let Some(i) = code.find("crate::{") {
            let list = &code[i + "crate::{".len()..];
            for part in list.split([',', '}']) {
                let name: String = part
                    .trim()
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    out.insert(name);
                }
            }
        }
    }
    out
}

/// `line` without a `//` comment (one outside a string literal).
fn strip_comment(line: &str) -> &str {
    let mut in_str = false;
    let mut prev = ' ';
    for (i, c) in line.char_indices() {
        match c {
            '"' if prev != '\\' => in_str = !in_str,
            '/' if !in_str && line[i..].starts_with("//") => return &line[..i],
            _ => {}
        }
        prev = c;
    }
    line
}

/// Every breach of the rule in `graph` (module -> modules it imports), one message each.
fn violations(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let layer_of = |m: &str| LAYERS.iter().position(|(_, mods)| mods.contains(&m));
    let mut out = Vec::new();
    for (module, deps) in graph {
        let Some(mine) = layer_of(module) else {
            out.push(format!(
                "module `{module}` is in no layer: place it in LAYERS (src/layers.rs) and lib.rs"
            ));
            continue;
        };
        for dep in deps.iter().filter(|d| *d != module) {
            match layer_of(dep) {
                Some(theirs) if theirs > mine => out.push(format!(
                    "`{module}` ({}) imports `{dep}` ({}), a layer above it",
                    LAYERS[mine].0, LAYERS[theirs].0
                )),
                _ => {}
            }
        }
    }
    if let Some(cycle) = find_cycle(graph) {
        out.push(format!("module cycle: {}", cycle.join(" -> ")));
    }
    out
}

/// One import cycle between distinct top-level modules, if there is any.
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        m: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == m) {
            let mut cycle = path[i..].to_vec();
            cycle.push(m.to_string());
            return Some(cycle);
        }
        if done.contains(m) {
            return None;
        }
        path.push(m.to_string());
        for dep in graph.get(m).into_iter().flatten().filter(|d| *d != m) {
            if graph.contains_key(dep) {
                if let Some(c) = visit(dep, graph, path, done) {
                    return Some(c);
                }
            }
        }
        path.pop();
        done.insert(m.to_string());
        None
    }
    let mut done = BTreeSet::new();
    for m in graph.keys() {
        if let Some(c) = visit(m, graph, &mut Vec::new(), &mut done) {
            return Some(c);
        }
    }
    None
}

/// The import graph of the crate's source tree at `src`.
fn graph_of(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    fn walk(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let mut files = vec![];
    walk(src, &mut files);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in files {
        let rel = f.strip_prefix(src).unwrap();
        let first = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy();
        let module = first.trim_end_matches(".rs").to_string();
        if module == "lib" || module == "layers" {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap();
        graph.entry(module).or_default().extend(imports(&text));
    }
    graph
}

#[test]
fn every_import_points_down_and_no_module_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = graph_of(&src);
    assert!(graph.contains_key("commit") && graph.contains_key("storage"));
    let v = violations(&graph);
    assert!(v.is_empty(), "layering broken:\n{}", v.join("\n"));
}

#[test]
fn the_check_catches_an_upward_import_a_cycle_and_an_unplaced_module() {
    let g = |edges: &[(&str, &str)]| {
        let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (a, b) in edges {
            g.entry(a.to_string()).or_default().insert(b.to_string());
            g.entry(b.to_string()).or_default();
        }
        g
    };
    assert!(violations(&g(&[("compact", "commit"), ("commit", "storage")])).is_empty());
    let up = violations(&g(&[("storage", "catalog")]));
    assert!(
        up.iter()
            .any(|m| m.contains("`storage` (storage) imports `catalog`")),
        "{up:?}"
    );
    let cycle = violations(&g(&[("diagnose", "expire"), ("expire", "diagnose")]));
    assert!(
        cycle.iter().any(|m| m.starts_with("module cycle")),
        "{cycle:?}"
    );
    let unplaced = violations(&g(&[("newthing", "error")]));
    assert!(unplaced[0].contains("in no layer"), "{unplaced:?}");
    // What counts as an import: code, not comments or doc links.
    let found = imports(
        "use crate::error::Result;\n/// see [`crate::sql`]\nlet x = 1; // crate::catalog\n\
         use crate::{table::ident, storage};\nlet s = \"s3://b\"; crate::write::f();",
    );
    let want: BTreeSet<String> = ["error", "table", "storage", "write"]
        .map(String::from)
        .into();
    assert_eq!(found, want);
}
