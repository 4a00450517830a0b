//! Format v1 tables keep what v2 tables keep: refs (tags and branches) read, kept and written as
//! Iceberg's Java implementation does on v1, and a streaming writer's exactly-once resume after
//! expiry, where v1 has no sequence numbers to order snapshots by. And every writer's recovery
//! chain survives expiry, walked as Flink's and Kafka Connect's committers walk it.

use std::collections::HashMap;
use std::io::Write;
use std::time::Duration;

use floe::iceberg::spec::TableMetadata;
use floe::iceberg::TableIdent;
use floe::ingest::source;
use floe::ingest::stream::{IngestBuilder, IngestOptions};
use floe::operations::expire::ExpireBuilder;
use floe::operations::refs::{list_refs, CreateRefBuilder, DropRefBuilder, NewRef};
use floe::operations::Operation;

use crate::common::{count_and_sum, read_refs, sum_ids, Fixture};

async fn v1_table(fx: &Fixture, name: &str) -> TableIdent {
    let schema = floe::table::schema::parse_schema(
        "id bigint not null, ts timestamp, name string, amount double",
    )
    .unwrap();
    fx.create_table_with(
        name,
        schema,
        Some("day(ts)"),
        HashMap::from([("format-version".to_string(), "1".to_string())]),
    )
    .await
}

/// The `refs` object of the table's current metadata.json, as written on disk.
async fn refs_on_disk(fx: &Fixture, ident: &TableIdent) -> serde_json::Value {
    let t = fx
        .second_connection()
        .await
        .load_table(ident)
        .await
        .unwrap();
    let path = t
        .metadata_location()
        .unwrap()
        .trim_start_matches("file://")
        .to_string();
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    assert_eq!(json["format-version"], 1);
    json["refs"].clone()
}

#[tokio::test]
async fn v1_tags_and_branches_are_written_kept_by_commits_and_honoured_by_expiry() {
    let fx = Fixture::new().await;
    let ident = v1_table(&fx, "v1.refs").await;
    let a = fx.append(&ident, 0, 100).await;
    let b = fx.append(&ident, 100, 200).await;
    CreateRefBuilder::new(&fx.catalog, ident.clone())
        .with_tag("keep")
        .with_new_ref(NewRef {
            snapshot_id: Some(a),
            ..Default::default()
        })
        .execute()
        .await
        .unwrap();
    CreateRefBuilder::new(&fx.catalog, ident.clone())
        .with_branch("audit")
        .with_new_ref(NewRef {
            snapshot_id: Some(b),
            ..Default::default()
        })
        .execute()
        .await
        .unwrap();
    // Written into the v1 metadata.json, as Java writes them.
    let refs = refs_on_disk(&fx, &ident).await;
    assert_eq!(refs["keep"]["snapshot-id"], a, "{refs}");
    assert_eq!(refs["keep"]["type"], "tag", "{refs}");
    assert_eq!(refs["audit"]["snapshot-id"], b, "{refs}");
    assert_eq!(refs["audit"]["type"], "branch", "{refs}");

    // Later commits keep them; main follows the current snapshot.
    let c = fx.append(&ident, 200, 300).await;
    let d = fx.append(&ident, 300, 400).await;
    let refs = refs_on_disk(&fx, &ident).await;
    assert_eq!(refs["keep"]["snapshot-id"], a, "{refs}");
    assert_eq!(refs["audit"]["snapshot-id"], b, "{refs}");
    assert_eq!(refs["main"]["snapshot-id"], d, "{refs}");
    let mut names: Vec<String> = list_refs(&fx.load(&ident).await)
        .unwrap()
        .into_iter()
        .map(|r| r.name)
        .collect();
    names.sort();
    assert_eq!(names, ["audit", "keep", "main"]);

    // Expiry keeps what the refs need; the tag's rows stay readable, by PyIceberg too.
    let e = ExpireBuilder::new(&fx.catalog, ident.clone())
        .with_older_than_age(Duration::ZERO)
        .with_retain_last(1)
        .execute()
        .await
        .unwrap();
    assert_eq!(e.plan.expired_snapshots, vec![c], "{:?}", e.plan);
    let t = fx.load(&ident).await;
    let mut kept: Vec<i64> = t.metadata().snapshots().map(|s| s.snapshot_id()).collect();
    kept.sort();
    let mut want = vec![a, b, d];
    want.sort();
    assert_eq!(kept, want);
    let seen = read_refs(&fx, "v1.refs", &["keep", "audit", "main"]);
    assert_eq!(seen["read"]["keep"]["rows"], 100, "{seen}");
    assert_eq!(seen["read"]["keep"]["sum"], sum_ids(0, 100), "{seen}");
    assert_eq!(seen["read"]["audit"]["rows"], 200, "{seen}");
    assert_eq!(seen["read"]["main"]["rows"], 400, "{seen}");

    // A dropped tag leaves the file.
    DropRefBuilder::new(&fx.catalog, ident.clone())
        .with_tag("keep")
        .execute()
        .await
        .unwrap();
    let refs = refs_on_disk(&fx, &ident).await;
    assert!(refs.get("keep").is_none(), "{refs}");
    assert_eq!(refs["audit"]["snapshot-id"], b, "{refs}");
}

fn lines_file(dir: &std::path::Path, n: i64) -> std::path::PathBuf {
    let path = dir.join("events.ndjson");
    let mut f = std::fs::File::create(&path).unwrap();
    for id in 0..n {
        writeln!(
            f,
            "{{\"id\": {id}, \"ts\": \"2026-01-0{}T10:00:00\", \"name\": \"n{id}\", \"amount\": 1.5}}",
            1 + id % 3
        )
        .unwrap();
    }
    path
}

async fn ingest_file(fx: &Fixture, ident: &TableIdent, path: &std::path::Path) {
    let mut o = IngestOptions::new("w-file");
    o.commit_interval = Duration::from_secs(3600);
    let src = source::open(&path.display().to_string(), false).unwrap();
    IngestBuilder::new(&fx.catalog, ident.clone(), src, o)
        .execute()
        .await
        .unwrap();
}

/// The snapshot a committer finds by walking parent ids from `branch`'s head until one
/// carries `key` = `value`, stopping at the first parent the metadata no longer holds (as
/// Flink's `IcebergFilesCommitter` and Kafka Connect's `Coordinator` do).
fn java_walk(md: &TableMetadata, key: &str, value: &str) -> Option<i64> {
    let mut cur = md.current_snapshot().cloned();
    while let Some(s) = cur {
        if s.summary()
            .additional_properties
            .get(key)
            .map(String::as_str)
            == Some(value)
        {
            return Some(s.snapshot_id());
        }
        cur = s
            .parent_snapshot_id()
            .and_then(|p| md.snapshot_by_id(p).cloned());
    }
    None
}

#[tokio::test]
async fn a_v1_ingest_resumes_exactly_after_expiry_and_its_recovery_chain_survives() {
    let fx = Fixture::new().await;
    let dir = tempfile::tempdir().unwrap();
    let file = lines_file(dir.path(), 100);

    // Chain protection off: expiry leaves a gap between the head and the writer's snapshot,
    // which the writer must still find on v1 (no sequence numbers).
    for (name, chain) in [("v1.gap", "0s"), ("v1.chain", "7d")] {
        let ident = v1_table(&fx, name).await;
        fx.set_property(&ident, "floe.expire.writer-max-age", chain)
            .await;
        ingest_file(&fx, &ident, &file).await;
        fx.append(&ident, 1000, 1001).await;
        fx.append(&ident, 1001, 1002).await;
        for (pass, max) in [None, Some(1)].into_iter().enumerate() {
            let mut e = ExpireBuilder::new(&fx.catalog, ident.clone())
                .with_older_than_age(Duration::ZERO)
                .with_retain_last(1);
            if let Some(m) = max {
                e = e.with_max_snapshots(m);
            }
            let report = e.execute().await.unwrap();
            let md = fx.load(&ident).await.metadata().clone();
            let walked = java_walk(&md, "floe.writer-id", "w-file");
            if chain == "0s" {
                // The first pass reports the chain it does not keep (and cuts it).
                assert!(report.plan.chains.iter().all(|c| !c.kept));
                if pass == 0 {
                    assert!(
                        report.plan.chains.iter().any(|c| c.reason.is_some()),
                        "{:?}",
                        report.plan
                    );
                }
            } else {
                assert!(
                    walked.is_some(),
                    "{name}: the chain was cut: {:?}",
                    report.plan
                );
                assert!(report
                    .plan
                    .chains
                    .iter()
                    .any(|c| c.kept && c.writer == "floe:w-file"));
            }
        }
        // The same file again: nothing is read twice.
        ingest_file(&fx, &ident, &file).await;
        assert_eq!(
            count_and_sum(&fx.catalog, &ident).await,
            (102, sum_ids(0, 100) + 1000 + 1001),
            "{name}"
        );
    }
}
