//! Helpers shared by the CLI test binaries: run `floe` in a directory, read its JSON, build a
//! table of small files, count rows.
#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

pub fn floe(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_floe"))
        .current_dir(dir)
        .args(args)
        .env_remove("FLOE_WAREHOUSE")
        .env_remove("FLOE_CATALOG")
        .output()
        .expect("floe runs")
}

pub fn ok_json(dir: &Path, args: &[&str]) -> Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let out = floe(dir, &all);
    assert!(
        out.status.success(),
        "floe {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)))
}

pub fn json_lines(out: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

pub fn walk_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = vec![];
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            if e.path().is_dir() {
                out.extend(walk_files(&e.path()));
            } else {
                out.push(e.path());
            }
        }
    }
    out
}

pub fn count_and_sum(d: &Path, table: &str) -> (i64, i64) {
    let out = floe(
        d,
        &[
            "--json",
            "sql",
            &format!("SELECT count(*) AS n, sum(id) AS s FROM {table}"),
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows = json_lines(&out);
    (
        rows[0]["n"].as_i64().unwrap(),
        rows[0]["s"].as_i64().unwrap(),
    )
}

pub fn make_table_with_small_files(d: &Path, batches: usize, rows: usize) -> (i64, i64) {
    ok_json(d, &["namespace", "create", "db"]);
    ok_json(
        d,
        &[
            "table",
            "create",
            "db.t",
            "--schema",
            "id bigint not null, ts timestamp, payload string",
            "--partition",
            "day(ts)",
        ],
    );
    let (mut n, mut s) = (0i64, 0i64);
    for b in 0..batches {
        let mut text = String::new();
        for r in 0..rows {
            let id = (b * rows + r) as i64;
            text.push_str(&format!(
                "{{\"id\": {id}, \"ts\": \"2026-05-0{}T12:00:00\", \"payload\": \"{}\"}}\n",
                1 + id % 3,
                "x".repeat(20 + (id % 50) as usize)
            ));
            n += 1;
            s += id;
        }
        let f = d.join(format!("b{b}.ndjson"));
        std::fs::write(&f, text).unwrap();
        ok_json(d, &["append", "db.t", f.to_str().unwrap()]);
    }
    (n, s)
}

pub fn snapshot_count(d: &Path) -> u64 {
    ok_json(d, &["table", "describe", "db.t"])["snapshot_count"]
        .as_u64()
        .unwrap()
}
