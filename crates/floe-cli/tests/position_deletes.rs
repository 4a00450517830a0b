//! `floe rewrite-position-delete-files` and compaction's handling of position delete files, end
//! to end through the binary; `failed_data_files_count` when groups fail.

use std::path::Path;

use floe::catalog::{parse_table_ident, Catalog, CatalogConfig};
use floe::iceberg::spec::DataContentType;

mod common;
use common::*;

/// Adds, in one commit, a position delete file per live data file of `db.t` (deleting its
/// position 0, no `referenced_data_file`, as Spark writes them). Returns the files added.
async fn delete_first_rows(d: &Path) -> usize {
    let config = CatalogConfig::embedded(Some(&d.join("warehouse"))).unwrap();
    let catalog = Catalog::connect(&config).await.unwrap();
    let ident = parse_table_ident("db.t").unwrap();
    let t = catalog.load_table(&ident).await.unwrap();
    let mut deletes = vec![];
    for f in floe::table::manifests::live_files(&t).await.unwrap() {
        if f.file.content_type() != DataContentType::Data {
            continue;
        }
        let rows = vec![(f.file.file_path().to_string(), 0)];
        let del = floe::write::deletes::write_position_delete_file(
            &t,
            f.spec_id,
            f.file.partition().clone(),
            rows,
            false,
        )
        .await
        .unwrap()
        .unwrap();
        deletes.push(del);
    }
    let n = deletes.len();
    floe::commit::Committer::new(&catalog, &ident)
        .commit(floe::commit::SnapshotUpdate::delete(&t, vec![], deletes))
        .await
        .unwrap();
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rewrite_position_delete_files_merges_per_partition_and_compaction_drops_them() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    make_table_with_small_files(d, 6, 10);
    assert_eq!(delete_first_rows(d).await, 18);
    let rows = count_and_sum(d, "db.t");
    assert_eq!(rows.0, 60 - 18);

    let dry = ok_json(d, &["rewrite-position-delete-files", "db.t", "--dry-run"]);
    assert_eq!(dry["groups"].as_array().unwrap().len(), 3, "{dry}");
    assert_eq!(dry["live_position_delete_files"], 18);
    assert!(dry["snapshot_id"].is_null());

    let v = ok_json(d, &["rewrite-position-delete-files", "db.t"]);
    assert_eq!(v["rewritten_delete_files_count"], 18, "{v}");
    assert_eq!(v["added_delete_files_count"], 3, "one per day");
    assert_eq!(v["added_deletes"], 18);
    assert!(v["snapshot_id"].is_i64());
    assert_eq!(count_and_sum(d, "db.t"), rows);
    let py = python_read(d, "db.t", "id");
    for reader in ["pyiceberg", "duckdb"] {
        assert_eq!(py[reader]["rows"], rows.0, "{py}");
        assert_eq!(py[reader]["sum"], rows.1, "{py}");
    }

    // Nothing left to do, said in text; a bad option is refused by name.
    let out = floe(d, &["rewrite-position-delete-files", "db.t"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(text.contains("nothing to rewrite"), "{text}");
    let out = floe(
        d,
        &[
            "rewrite-position-delete-files",
            "db.t",
            "--option",
            "max-cows=1",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("max-cows") && err.contains("min-input-files"),
        "{err}"
    );

    // Compaction with delete-file-threshold rewrites every data file of each day and drops
    // that day's delete file in the same commit.
    let out = floe(
        d,
        &["compact", "db.t", "--option", "delete-file-threshold=1"],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("removed 3 position delete file(s)"), "{text}");
    assert_eq!(count_and_sum(d, "db.t"), rows);
    let py = python_read(d, "db.t", "id");
    assert_eq!(py["duckdb"]["rows"], rows.0, "{py}");
    assert_eq!(py["pyiceberg"]["sum"], rows.1, "{py}");
}

#[test]
fn failed_data_files_count_names_the_input_files_of_failed_groups() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Six appends: six small files in each of three days, three groups.
    let expected = make_table_with_small_files(d, 6, 10);
    let data = d.join("warehouse/db/t/data");
    let files_before = walk_files(&data).len();
    // Fault injection: every commit of the compaction fails as a conflict would.
    let run = |json: bool| {
        let mut args = vec![
            "compact",
            "db.t",
            "--partial-progress",
            "--max-commits",
            "3",
        ];
        if json {
            args.insert(0, "--json");
        }
        std::process::Command::new(env!("CARGO_BIN_EXE_floe"))
            .current_dir(d)
            .args(&args)
            .env_remove("FLOE_WAREHOUSE")
            .env_remove("FLOE_CATALOG")
            .env("FLOE_FAULT_FAIL_COMPACT_COMMIT", "injected")
            .output()
            .unwrap()
    };
    let out = run(true);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["failed_groups"].as_array().unwrap().len(), 3, "{v}");
    assert_eq!(v["failed_data_files_count"], 18, "{v}");
    let out = run(false);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("3 group(s) (18 data files) failed"), "{err}");
    assert_eq!(count_and_sum(d, "db.t"), expected);
    assert_eq!(
        walk_files(&data).len(),
        files_before,
        "failed output deleted"
    );
}
