//! Fixing a table's layout end to end, as a user would: `diagnose` names over-partitioning and
//! prints the spec change, `table evolve-partition` commits it, `compact` rewrites the old
//! files into it, `diagnose --compare` shows before and after, and PyIceberg and DuckDB read
//! the same rows throughout.

mod common;

use common::{count_and_sum, floe, json_lines, ok_json, python_read};
use serde_json::Value;

/// Spec ids of the live data files (from `$files`).
fn live_spec_ids(d: &std::path::Path) -> Vec<i64> {
    let out = floe(d, &["--json", "sql", "SELECT spec_id FROM db.h$files"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    json_lines(&out)
        .iter()
        .map(|r| r["spec_id"].as_i64().unwrap())
        .collect()
}

fn readers_agree(d: &std::path::Path) -> i64 {
    let (n, s) = count_and_sum(d, "db.h");
    let r = python_read(d, "db.h", "id");
    for reader in ["pyiceberg", "duckdb"] {
        assert_eq!(r[reader]["rows"], n, "{reader}: {r}");
        assert_eq!(r[reader]["sum"].as_i64(), Some(s), "{reader}: {r}");
    }
    assert_eq!(r["pyiceberg"]["checksum"], r["duckdb"]["checksum"], "{r}");
    n
}

#[test]
fn over_partitioned_table_is_named_evolved_compacted_and_compared() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    ok_json(d, &["namespace", "create", "db"]);
    ok_json(
        d,
        &[
            "table",
            "create",
            "db.h",
            "--schema",
            "id bigint not null, ts timestamp, payload string",
            "--partition",
            "hour(ts)",
        ],
    );
    // One writer, a commit per hour of event time over three days, a few KB per
    // hour-partition per commit.
    let mut id = 0i64;
    for hour in 0..72 {
        let mut text = String::new();
        for r in 0..40 {
            text.push_str(&format!(
                "{{\"id\": {id}, \"ts\": \"2026-05-{:02}T{:02}:{:02}:00\", \"payload\": \"{}\"}}\n",
                1 + hour / 24,
                hour % 24,
                r,
                "x".repeat(40 + (id % 30) as usize)
            ));
            id += 1;
        }
        let f = d.join(format!("h{hour}.ndjson"));
        std::fs::write(&f, text).unwrap();
        ok_json(d, &["append", "db.h", f.to_str().unwrap()]);
    }
    let rows = readers_agree(d);
    assert_eq!(rows, id);

    // diagnose names the problem, with the arithmetic and the command.
    let report = ok_json(d, &["diagnose", "db.h", "--save", "before.json"]);
    let finding = &report["over_partitioned"];
    assert_eq!(finding["holds"], true, "{report}");
    assert_eq!(finding["spec"], "hour(ts)");
    let spec = finding["suggested_spec"].as_str().unwrap().to_string();
    assert!(
        ["day(ts)", "month(ts)", "year(ts)"].contains(&spec.as_str()),
        "{spec}"
    );
    let commands: Vec<String> = finding["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        commands[0],
        format!("floe table evolve-partition db.h --spec '{spec}'"),
        "{commands:?}"
    );
    let text = floe(d, &["diagnose", "db.h"]);
    let text = String::from_utf8_lossy(&text.stdout).to_string();
    assert!(text.contains(&commands[0]), "{text}");
    let old_spec = live_spec_ids(d)[0];

    // The printed change, then compaction.
    let evolved = ok_json(d, &["table", "evolve-partition", "db.h", "--spec", &spec]);
    assert_eq!(evolved["changed"], true);
    assert_eq!(evolved["files_in_other_specs"], 72);
    let new_spec = evolved["spec_id"].as_i64().unwrap();
    assert_ne!(new_spec, old_spec);
    let described = ok_json(d, &["table", "describe", "db.h"]);
    assert_eq!(described["partition_spec_id"], new_spec);
    assert_eq!(
        readers_agree(d),
        rows,
        "readers agree on a table of two specs"
    );
    let compacted: Value = ok_json(d, &["compact", "db.h"]);
    assert!(
        compacted["rewritten_files"].as_u64().unwrap() >= 72,
        "{compacted}"
    );
    let specs = live_spec_ids(d);
    assert!(specs.iter().all(|s| *s == new_spec), "{specs:?}");
    assert!(specs.len() <= 3, "one file per day at most: {specs:?}");
    assert_eq!(readers_agree(d), rows);

    // Before / after.
    let cmp = ok_json(d, &["diagnose", "db.h", "--compare", "before.json"]);
    assert_eq!(cmp["before"]["data_files"], 72);
    assert_eq!(cmp["after"]["data_files"], specs.len());
    let after = &cmp["report"]["over_partitioned"];
    assert!(
        after.is_null() || after["holds"] == false,
        "the finding is gone: {after}"
    );
    let human = floe(d, &["diagnose", "db.h", "--compare", "before.json"]);
    assert!(human.status.success());
    assert!(String::from_utf8_lossy(&human.stdout).contains("before / after: db.h"));

    // A bad change is refused with the reason, and the table is unchanged.
    let bad = floe(
        d,
        &["table", "evolve-partition", "db.h", "--add", "hour(ts)"],
    );
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("redundant"), "{err}");
    let described = ok_json(d, &["table", "describe", "db.h"]);
    assert_eq!(described["partition_spec_id"], new_spec);
}

#[test]
fn evolve_schema_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    common::make_table_with_small_files(d, 2, 20);
    let dry = ok_json(
        d,
        &[
            "table",
            "evolve-schema",
            "db.t",
            "--add-column",
            "device string",
            "--dry-run",
        ],
    );
    assert_eq!(dry["dry_run"], true);
    let described = ok_json(d, &["table", "describe", "db.t"]);
    assert_eq!(described["schema_id"], dry["schema_id_before"]);
    let v = ok_json(
        d,
        &[
            "table",
            "evolve-schema",
            "db.t",
            "--add-column",
            "device string",
            "--rename-column",
            "payload=body",
        ],
    );
    assert_eq!(v["applied"].as_array().unwrap().len(), 2, "{v}");
    let f = d.join("new.ndjson");
    std::fs::write(
        &f,
        "{\"id\": 1000, \"ts\": \"2026-05-01T00:00:00\", \"body\": \"b\", \"device\": \"d1\"}\n",
    )
    .unwrap();
    ok_json(d, &["append", "db.t", f.to_str().unwrap()]);
    let out = floe(
        d,
        &[
            "--json",
            "sql",
            "SELECT count(body) AS bodies, count(device) AS devices FROM db.t",
        ],
    );
    let r = &json_lines(&out)[0];
    assert_eq!(
        (r["bodies"].as_i64(), r["devices"].as_i64()),
        (Some(41), Some(1))
    );
    let bad = floe(
        d,
        &["table", "evolve-schema", "db.t", "--set-type", "id int"],
    );
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("cannot be promoted"));
}
