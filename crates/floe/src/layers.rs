//! The layering rule of the crate tour (`lib.rs`), checked on the source: every `crate::` path
//! in code (comments and doc links excepted) must name a module of the same layer or of a
//! layer below, the modules of one layer must not import each other in a cycle, and every
//! top-level module must be placed in a layer. Runs with the unit tests, so CI fails on a new
//! upward import.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Folders that are floors, not modules: each child of theirs is a unit of its own (an
/// operation, a base module), placed in a layer and checked like a top-level module.
const FLOORS: &[&str] = &["base", "operations"];

/// Layers from the bottom up, with their units (top-level modules, or children of a floor).
const LAYERS: &[(&str, &[&str])] = &[
    (
        "base",
        &[
            "base",
            "base::error",
            "base::properties",
            "base::secrets",
            "base::fault",
            "base::cost",
            "base::server",
        ],
    ),
    ("storage", &["storage"]),
    ("table", &["table"]),
    ("catalog", &["catalog"]),
    ("commit", &["commit"]),
    // Leases, run history and ingest hand-offs in one SQL database (the SQL catalog's pool):
    // shared by `maintain` and `ingest`.
    ("coordination", &["coordination"]),
    ("write", &["write"]),
    // Records in: NDJSON, CSV and Parquet input decoded into batches of the table's schema,
    // shared by `append` and `ingest`.
    ("records", &["records"]),
    (
        "operations",
        &[
            "operations",
            "operations::query",
            "operations::append",
            "operations::alter",
            "operations::refs",
            "operations::compact",
            "operations::change",
            "operations::expire",
            "operations::clean",
            "operations::diagnose",
            "operations::inspect",
            "operations::sql",
        ],
    ),
    // Getting records in: `floe ingest` streams into tables; its group lease store
    // (`--group`) is the coordination layer's. The maintenance it runs in-process
    // (`--maintain`) is given by its caller through its hook (`ingest::hook`), so it imports
    // no maintenance code.
    ("ingest", &["ingest"]),
    // The self-driving service; `maintain::in_stream` implements ingest's hook.
    ("maintain", &["maintain"]),
];

/// The unit a module path belongs to: its first segment, or its first two under a floor.
fn unit_of(module: &[String]) -> Option<String> {
    let first = module.first()?;
    match module.get(1) {
        Some(second) if FLOORS.contains(&first.as_str()) => Some(format!("{first}::{second}")),
        _ => Some(first.clone()),
    }
}

/// The units a source file names through `crate::`, outside comments: a path names the
/// longest of `units` it starts with (`crate::operations::Operation` names `operations`,
/// `crate::operations::compact::plan` names `operations::compact`); any other path names its
/// first segment.
fn imports(src: &str, units: &BTreeSet<String>) -> BTreeSet<String> {
    paths(src)
        .into_iter()
        .filter(|p| p[0] == "crate" && p.len() > 1)
        .map(|p| match p.get(2) {
            Some(b) if units.contains(&format!("{}::{b}", p[1])) => format!("{}::{b}", p[1]),
            _ => p[1].clone(),
        })
        .collect()
}

/// Every path a source file names from `crate::`, `super::` or `self::`, outside comments, as
/// its segments from that root on. `use` groups are expanded, over several lines and nested:
/// `use crate::{a::{b, c}, d}` gives `crate::a::b`, `crate::a::c` and `crate::d`; `self` in
/// a group names the group's prefix and `*` ends the path there.
fn paths(src: &str) -> Vec<Vec<String>> {
    let code: String = src
        .lines()
        .map(|l| format!("{}\n", strip_comment(l)))
        .collect();
    let code = code.as_bytes();
    let is_ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut out = Vec::new();
    let mut i = 0;
    while i < code.len() {
        if is_ident(code[i]) && (i == 0 || !is_ident(code[i - 1]) && code[i - 1] != b'$') {
            let word_end = (i..code.len())
                .find(|&j| !is_ident(code[j]))
                .unwrap_or(code.len());
            let word = &code[i..word_end];
            let rooted = matches!(word, b"crate" | b"super" | b"self");
            if rooted && code[word_end..].starts_with(b"::") {
                let mut at = i;
                tree(code, &mut at, Vec::new(), &mut out);
                i = at.max(word_end);
                continue;
            }
            i = word_end;
        } else {
            i += 1;
        }
    }
    out
}

/// Parses one path (or `use` tree) at `code[*at..]`, after the segments in `prefix`, into
/// `out`; leaves `*at` after it.
fn tree(code: &[u8], at: &mut usize, mut prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
    let skip_ws = |at: &mut usize| {
        while *at < code.len() && code[*at].is_ascii_whitespace() {
            *at += 1;
        }
    };
    loop {
        skip_ws(at);
        match code.get(*at) {
            Some(b'{') => {
                *at += 1;
                loop {
                    skip_ws(at);
                    match code.get(*at) {
                        None => return,
                        Some(b'}') => {
                            *at += 1;
                            return;
                        }
                        Some(b',') => *at += 1,
                        Some(_) => {
                            let before = *at;
                            tree(code, at, prefix.clone(), out);
                            if *at == before {
                                *at += 1; // not a path: step over it
                            }
                        }
                    }
                }
            }
            Some(b'*') => {
                *at += 1;
                break;
            }
            Some(c) if c.is_ascii_alphanumeric() || *c == b'_' => {
                let end = (*at..code.len())
                    .find(|&j| !(code[j].is_ascii_alphanumeric() || code[j] == b'_'))
                    .unwrap_or(code.len());
                let word = String::from_utf8_lossy(&code[*at..end]).into_owned();
                *at = end;
                // `self` inside a group names the prefix itself.
                if word != "self" || prefix.is_empty() {
                    prefix.push(word);
                }
                let mut look = *at;
                skip_ws(&mut look);
                if code[look..].starts_with(b"::") {
                    *at = look + 2;
                    continue;
                }
                // `a as b`: the alias is no path.
                if code[look..].starts_with(b"as")
                    && code.get(look + 2).is_some_and(|c| c.is_ascii_whitespace())
                {
                    *at = look + 2;
                    skip_ws(at);
                    while *at < code.len()
                        && (code[*at].is_ascii_alphanumeric() || code[*at] == b'_')
                    {
                        *at += 1;
                    }
                }
                break;
            }
            _ => break,
        }
    }
    if !prefix.is_empty() {
        out.push(prefix);
    }
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

/// Every `.rs` file under `src`, as its path relative to `src` (with `/`) and its text.
fn sources(src: &Path) -> Vec<(String, String)> {
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
    files.sort();
    files
        .into_iter()
        .map(|f| {
            let rel = f.strip_prefix(src).unwrap();
            let rel: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            (rel.join("/"), std::fs::read_to_string(&f).unwrap())
        })
        .collect()
}

/// The units of a source tree: what `unit_of` gives for each file's module path.
fn units_of(files: &[(String, String)]) -> BTreeSet<String> {
    files
        .iter()
        .filter_map(|(rel, _)| unit_of(&module_of(rel)))
        .filter(|u| u != "layers")
        .collect()
}

/// The import graph between the units of the crate's source tree at `src`.
fn graph_of(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let files = sources(src);
    let units = units_of(&files);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (rel, text) in &files {
        let Some(unit) = unit_of(&module_of(rel)) else {
            continue; // lib.rs, the crate root
        };
        if unit == "layers" {
            continue;
        }
        graph.entry(unit).or_default().extend(imports(text, &units));
    }
    graph
}

/// File circles known today, each as the set of its files, until they are untangled. A
/// listed circle that is gone fails the check too, so the list only shrinks.
const KNOWN_FILE_CYCLES: &[&[&str]] = &[];

/// The module path of a source file: `a/b.rs` and `a/b/mod.rs` are `a::b`; `lib.rs` is the
/// crate root.
fn module_of(rel: &str) -> Vec<String> {
    let mut m: Vec<String> = rel.split('/').map(String::from).collect();
    let last = m.pop().unwrap_or_default();
    match last.trim_end_matches(".rs") {
        "mod" | "lib" | "main" => {}
        name => m.push(name.to_string()),
    }
    m
}

/// `src` without the items under a `#[cfg(test)]` line (a test module, helper or import):
/// the item runs to its `;` or to the `}` that closes it.
fn without_tests(src: &str) -> String {
    let mut out = String::new();
    let mut lines = src.lines();
    while let Some(line) = lines.next() {
        if line.trim() == "#[cfg(test)]" {
            let mut depth = 0i64;
            for l in lines.by_ref() {
                let code = strip_comment(l).trim_end();
                depth += code.matches('{').count() as i64 - code.matches('}').count() as i64;
                if depth <= 0 && (code.ends_with(';') || code.ends_with('}')) {
                    break;
                }
            }
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// The import graph between the files of each unit (file -> files it names
/// through `crate::`, `super::` or `self::` paths; a path names the file of its longest
/// module prefix). Test code is left out, and so are a module's imports of its own
/// submodules: a parent declares, re-exports and drives its children, the one direction a
/// child may not point back along through a sibling.
fn file_graph(files: &[(String, String)]) -> BTreeMap<String, BTreeSet<String>> {
    let file_of: BTreeMap<Vec<String>, &str> = files
        .iter()
        .map(|(rel, _)| (module_of(rel), rel.as_str()))
        .collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (rel, text) in files {
        let me = module_of(rel);
        if me.is_empty() || me.iter().any(|s| s == "tests") || me[0] == "layers" {
            continue;
        }
        let deps = graph.entry(rel.clone()).or_default();
        for path in paths(&without_tests(text)) {
            let mut abs = match path[0].as_str() {
                "crate" => Vec::new(),
                "self" => me.clone(),
                _ => me.clone(), // `super`, handled below with the ones after it
            };
            let mut rest = &path[1..];
            if path[0] == "super" {
                abs.pop();
            }
            while rest.first().is_some_and(|s| s == "super") {
                abs.pop();
                rest = &rest[1..];
            }
            abs.extend(rest.iter().cloned());
            let target = (1..=abs.len())
                .rev()
                .find_map(|k| file_of.get(&abs[..k]).map(|f| (k, *f)));
            let Some((k, target)) = target else { continue };
            let theirs = &abs[..k];
            if unit_of(&abs) != unit_of(&me) || theirs.starts_with(&me) {
                continue;
            }
            deps.insert(target.to_string());
        }
    }
    graph
}

/// Every file circle in `graph`: each set of files that reach one another, sorted.
fn file_cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    let reach = |from: &str| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.to_string()];
        while let Some(m) = todo.pop() {
            for d in graph.get(&m).into_iter().flatten() {
                if seen.insert(d.clone()) {
                    todo.push(d.clone());
                }
            }
        }
        seen
    };
    let reached: BTreeMap<&String, BTreeSet<String>> =
        graph.keys().map(|m| (m, reach(m))).collect();
    let mut out: Vec<Vec<String>> = Vec::new();
    for (m, from_m) in &reached {
        if !from_m.contains(*m) || out.iter().any(|c| c.contains(m)) {
            continue;
        }
        let circle: Vec<String> = from_m
            .iter()
            .filter(|o| reached.get(o).is_some_and(|r| r.contains(*m)))
            .cloned()
            .collect();
        if circle.len() > 1 {
            out.push(circle);
        }
    }
    out
}

/// Every file circle of `graph` not in `known`, and every entry of `known` that is no
/// longer a circle, one message each.
fn file_violations(graph: &BTreeMap<String, BTreeSet<String>>, known: &[&[&str]]) -> Vec<String> {
    let cycles = file_cycles(graph);
    let mut out = Vec::new();
    for c in &cycles {
        if known.iter().any(|k| k.iter().eq(c.iter())) {
            continue;
        }
        let sub: BTreeMap<String, BTreeSet<String>> = c
            .iter()
            .map(|f| {
                let deps = graph[f].iter().filter(|d| c.contains(*d)).cloned();
                (f.clone(), deps.collect())
            })
            .collect();
        let path = find_cycle(&sub).unwrap_or_else(|| c.clone());
        out.push(format!(
            "file cycle: {} (files in the circle: {})",
            path.join(" -> "),
            c.join(", ")
        ));
    }
    for k in known {
        if !cycles.iter().any(|c| k.iter().eq(c.iter())) {
            out.push(format!(
                "known file cycle {k:?} is gone (or changed): update KNOWN_FILE_CYCLES"
            ));
        }
    }
    out
}

#[test]
fn every_import_points_down_and_no_module_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = graph_of(&src);
    assert!(graph.contains_key("commit") && graph.contains_key("operations::compact"));
    // Every unit is placed: a new operation under operations/ must be put in LAYERS.
    assert!(graph.contains_key("base::error"), "{:?}", graph.keys());
    let v = violations(&graph);
    assert!(v.is_empty(), "layering broken:\n{}", v.join("\n"));
}

#[test]
fn no_file_cycle_inside_a_module() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = file_graph(&sources(&src));
    assert!(
        graph.contains_key("operations/diagnose/compute.rs"),
        "{:?}",
        graph.keys()
    );
    let v = file_violations(&graph, KNOWN_FILE_CYCLES);
    assert!(v.is_empty(), "file circles:\n{}", v.join("\n"));
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
    assert!(violations(&g(&[
        ("operations::compact", "commit"),
        ("commit", "storage")
    ]))
    .is_empty());
    let up = violations(&g(&[("storage", "catalog")]));
    assert!(
        up.iter()
            .any(|m| m.contains("`storage` (storage) imports `catalog`")),
        "{up:?}"
    );
    let cycle = violations(&g(&[
        ("operations::diagnose", "operations::expire"),
        ("operations::expire", "operations::diagnose"),
    ]));
    assert!(
        cycle.iter().any(|m| m.starts_with("module cycle")),
        "{cycle:?}"
    );
    let unplaced = violations(&g(&[("newthing", "base::error")]));
    assert!(unplaced[0].contains("in no layer"), "{unplaced:?}");
    // What counts as an import: code, not comments or doc links.
    let none = BTreeSet::new();
    let found = imports(
        "use crate::error::Result;\n/// see [`crate::sql`]\nlet x = 1; // crate::catalog\n\
         use crate::{table::ident, storage};\nlet s = \"s3://b\"; crate::write::f();",
        &none,
    );
    let want: BTreeSet<String> = ["error", "table", "storage", "write"]
        .map(String::from)
        .into();
    assert_eq!(found, want);
    // A child of a floor is a unit of its own; the floor's own file is another.
    let units: BTreeSet<String> = ["operations", "operations::compact", "commit"]
        .map(String::from)
        .into();
    let found = imports(
        "use crate::operations::compact::plan;\nuse crate::operations::Operation;\n\
         use crate::commit::Ledger;",
        &units,
    );
    assert_eq!(found, units);
    assert_eq!(
        unit_of(&["operations".into(), "sql".into(), "udf".into()]).as_deref(),
        Some("operations::sql")
    );
    assert_eq!(
        unit_of(&["table".into(), "ident".into()]).as_deref(),
        Some("table")
    );
}

#[test]
fn paths_span_lines_and_nested_groups() {
    let p = |src: &str| -> Vec<String> { paths(src).iter().map(|p| p.join("::")).collect() };
    assert_eq!(
        p("use crate::{\n    a::b,\n    // crate::nope\n    c,\n};"),
        ["crate::a::b", "crate::c"]
    );
    assert_eq!(
        p("use crate::{a::{b, c::{self, D}}, d as e, f::*};"),
        [
            "crate::a::b",
            "crate::a::c",
            "crate::a::c::D",
            "crate::d",
            "crate::f"
        ]
    );
    assert_eq!(
        p("use super::{observe, model::{Report,\n History}};\nlet x = self::y::z(1);"),
        [
            "super::observe",
            "super::model::Report",
            "super::model::History",
            "self::y::z"
        ]
    );
    assert_eq!(
        p("super::super::render::text(&r); pub(crate) fn f() {} $crate::x::y; Self::new()"),
        ["super::super::render::text"]
    );
    assert_eq!(p("use crate::a\n    ::b;"), ["crate::a::b"]);
    let found = imports(
        "use crate::{\n  table::ident,\n  storage::{listing, delete},\n};",
        &BTreeSet::new(),
    );
    let want: BTreeSet<String> = ["table", "storage"].map(String::from).into();
    assert_eq!(found, want);
}

#[test]
fn file_cycles_are_found_through_crate_super_and_self_paths() {
    let files = |list: &[(&str, &str)]| -> Vec<(String, String)> {
        list.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    };
    // compute -> observe (crate::), observe -> partitioning (super::), partitioning ->
    // compute (self:: from the parent's view is not an edge, so via crate:: again).
    let circle = files(&[
        ("d/mod.rs", "mod compute; use self::compute::f; pub use self::observe::g;"),
        ("d/compute.rs", "use crate::d::observe::Observation;"),
        ("d/observe.rs", "use super::{partitioning::over, Report};"),
        ("d/partitioning.rs", "fn f() { crate::d::compute::median(&[]) }"),
        ("d/compute/tests.rs", "use super::super::render::text;"),
        ("d/render.rs", "use super::compute::Facts;\n#[cfg(test)]\nmod tests {\n    use crate::d::render::x;\n}\n"),
        ("e.rs", "use crate::d::compute::f;"),
    ]);
    let g = file_graph(&circle);
    let set = |l: &[&str]| -> BTreeSet<String> { l.iter().map(|s| s.to_string()).collect() };
    assert_eq!(
        g["d/mod.rs"],
        set(&[]),
        "a parent's imports of its children are no edges"
    );
    assert_eq!(g["d/observe.rs"], set(&["d/mod.rs", "d/partitioning.rs"]));
    assert_eq!(
        g["d/render.rs"],
        set(&["d/compute.rs"]),
        "test code is left out"
    );
    assert_eq!(
        g["e.rs"],
        set(&[]),
        "another top-level module is the module check's"
    );
    assert!(!g.contains_key("d/compute/tests.rs"));
    let want = ["d/compute.rs", "d/observe.rs", "d/partitioning.rs"];
    assert_eq!(file_cycles(&g), vec![want.map(String::from).to_vec()]);
    let v = file_violations(&g, &[]);
    assert_eq!(v.len(), 1, "{v:?}");
    assert!(
        v[0].starts_with("file cycle: d/compute.rs -> d/observe.rs"),
        "{v:?}"
    );
    assert!(file_violations(&g, &[&want]).is_empty());
    // A known circle that is gone is reported, so the list only shrinks.
    let stale = file_violations(&g, &[&want, &["d/a.rs", "d/b.rs"]]);
    assert!(stale[0].contains("is gone"), "{stale:?}");
    // One-way imports (the model below everyone) make no circle.
    let oneway = files(&[
        ("d/mod.rs", "pub use model::Report;"),
        ("d/model.rs", "use crate::table::Watermark;"),
        ("d/compute.rs", "use super::{model::Report, observe};"),
        ("d/observe.rs", "use super::model::{History, Report};"),
    ]);
    assert!(file_cycles(&file_graph(&oneway)).is_empty());
}
