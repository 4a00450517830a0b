//! `ingest --mode upsert|cdc` (DESIGN section 5, invariant 4 for upserts and CDC): a table fed
//! changes equals a reference model (a map by key fed the same changes) after every run,
//! across restarts and a crash between writing and committing, after compaction and expiry,
//! read by floe, PyIceberg and DuckDB; bad changes are dead letters.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use floe::ingest::change::IngestMode;
use floe::ingest::dead_letter::DeadLetterSink;
use floe::ingest::source;
use floe::ingest::stream::{IngestBuilder, IngestOptions};
use floe::ingest::upsert::ChangeOptions;
use rskafka::record::Record;

use crate::change::{
    assert_matches_model, assert_readers_match_model, delete_files, pk_table, Lcg, Model, REGIONS,
};
use crate::common::Fixture;
use crate::ingest::{kafka, produce_to};

/// One change: the key, and the new v (`None`: delete).
type Op = ((i64, String), Option<i64>);

fn upsert_options(writer: &str, mode: IngestMode) -> IngestOptions {
    let mut o = IngestOptions::new(writer);
    o.commit_interval = Duration::from_secs(3600);
    o.commit_records = Some(97);
    o.stop_when_idle = Some(Duration::from_secs(2));
    o.changes = ChangeOptions {
        mode,
        ..ChangeOptions::default()
    };
    o
}

/// The partition of a key: one key always goes to one partition (Kafka's rule for keyed
/// messages).
fn partition_of(key: &(i64, String), partitions: i32) -> i32 {
    (key.0 % partitions as i64) as i32
}

/// Produces `ops` as keyed Kafka messages: an upsert as a JSON row (every third one with
/// `"__deleted": "false"`), a delete as a tombstone (null value) or, every other one, a row
/// marked `"__deleted": "true"`.
async fn produce_changes(topic: &str, partitions: i32, ops: &[Op], create: bool) {
    let records = ops
        .iter()
        .enumerate()
        .map(|(i, ((id, region), v))| {
            let key = format!("{{\"id\": {id}, \"region\": \"{region}\"}}");
            let value = match v {
                Some(v) if i % 3 == 0 => Some(format!(
                    "{{\"id\": {id}, \"region\": \"{region}\", \"v\": {v}, \"__deleted\": \"false\"}}"
                )),
                Some(v) => Some(format!("{{\"id\": {id}, \"region\": \"{region}\", \"v\": {v}}}")),
                None if i % 2 == 0 => None,
                None => Some(format!(
                    "{{\"id\": {id}, \"region\": \"{region}\", \"v\": null, \"__deleted\": \"true\"}}"
                )),
            };
            (partition_of(&(*id, region.clone()), partitions), keyed(key, value))
        })
        .collect();
    produce_to(topic, partitions, records, create).await
}

/// A Kafka record with a key and (`None`: a tombstone) a value.
fn keyed(key: String, value: Option<String>) -> Record {
    Record {
        key: Some(key.into_bytes()),
        value: value.map(String::into_bytes),
        headers: Default::default(),
        timestamp: chrono::Utc::now(),
    }
}

/// `n` random changes over 150 ids x 3 regions: upserts (v from `base`), a quarter deletes.
fn random_ops(rng: &mut Lcg, n: usize, base: i64) -> Vec<Op> {
    (0..n)
        .map(|i| {
            let key = (
                rng.next(150) as i64,
                REGIONS[rng.next(3) as usize].to_string(),
            );
            let v = (rng.next(4) != 0).then_some(base + i as i64);
            (key, v)
        })
        .collect()
}

fn apply(model: &mut Model, ops: &[Op]) {
    for (k, v) in ops {
        match v {
            Some(v) => {
                model.insert(k.clone(), *v);
            }
            None => {
                model.remove(k);
            }
        }
    }
}

#[tokio::test]
async fn kafka_upserts_and_tombstones_match_a_reference_model_across_restarts_and_a_crash() {
    let fx = Fixture::new().await;
    let ident = pk_table(&fx, "s.users", true).await;
    let topic = format!("users-{}", uuid::Uuid::new_v4().simple());
    let uri = format!("kafka://{}/{topic}", kafka());
    let mut rng = Lcg(42);
    let mut model = Model::new();
    let run = |o: IngestOptions| {
        let (catalog, ident, uri) = (fx.catalog.clone(), ident.clone(), uri.clone());
        async move {
            IngestBuilder::new(&catalog, ident, source::open(&uri, false).unwrap(), o)
                .execute()
                .await
        }
    };
    for round in 0..3i64 {
        let ops = random_ops(&mut rng, 400, round * 10_000);
        produce_changes(&topic, 3, &ops, round == 0).await;
        apply(&mut model, &ops);
        let s = run(upsert_options("users", IngestMode::Upsert))
            .await
            .unwrap();
        assert_eq!(s.records, 400, "round {round}");
        assert_eq!(s.bad_records, 0);
        assert!(s.commits >= 2, "several commits per run: {s:?}");
        assert_matches_model(&fx, "s.users", &model, &format!("run {round}")).await;
    }
    // A crash between writing a window's files and committing them: the restart replays the
    // window from the committed positions.
    let ops = random_ops(&mut rng, 300, 90_000);
    produce_changes(&topic, 3, &ops, false).await;
    let mut crash = upsert_options("users", IngestMode::Upsert);
    crash.commit_records = None;
    crash.pause_before_commit = Some(Duration::from_secs(600));
    let task = tokio::spawn(run(crash));
    tokio::time::sleep(Duration::from_secs(4)).await;
    task.abort();
    let _ = task.await;
    apply(&mut model, &ops);
    let s = run(upsert_options("users", IngestMode::Upsert))
        .await
        .unwrap();
    assert_eq!(
        s.records, 300,
        "the crashed window is read again, nothing more"
    );
    assert_matches_model(&fx, "s.users", &model, "restart after a crash").await;
    assert!(delete_files(&fx, &ident).await > 0);
    assert_readers_match_model(&fx, "s.users", &model, "the stream");

    floe::compact::CompactBuilder::new(&fx.catalog, ident.clone())
        .with_option("rewrite-all", "true")
        .execute()
        .await
        .unwrap();
    assert_eq!(delete_files(&fx, &ident).await, 0);
    floe::expire::ExpireBuilder::new(&fx.catalog, ident.clone())
        .older_than(Duration::ZERO)
        .retain_last(1)
        .execute()
        .await
        .unwrap();
    assert_matches_model(&fx, "s.users", &model, "compaction and expiry").await;
    assert_readers_match_model(&fx, "s.users", &model, "compaction and expiry");

    // The stream goes on after maintenance, resuming where it was.
    let ops = random_ops(&mut rng, 200, 120_000);
    produce_changes(&topic, 3, &ops, false).await;
    apply(&mut model, &ops);
    let s = run(upsert_options("users", IngestMode::Upsert))
        .await
        .unwrap();
    assert_eq!(s.records, 200);
    assert_matches_model(&fx, "s.users", &model, "after maintenance").await;
}

#[tokio::test]
async fn debezium_events_from_ndjson_apply_in_order_and_bad_ones_are_dead_letters() {
    let fx = Fixture::new().await;
    pk_table(&fx, "s.cdc", false).await;
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("changes.ndjson");
    let dead = dir.path().join("dead.ndjson");
    let ev = |op: &str, before: Option<(i64, &str, i64)>, after: Option<(i64, &str, i64)>| {
        let row = |r: Option<(i64, &str, i64)>| match r {
            Some((id, region, v)) => {
                format!("{{\"id\": {id}, \"region\": \"{region}\", \"v\": {v}}}")
            }
            None => "null".to_string(),
        };
        format!(
            "{{\"before\": {}, \"after\": {}, \"op\": \"{op}\", \"source\": {{\"lsn\": 1}}, \"ts_ms\": 1}}",
            row(before),
            row(after)
        )
    };
    let mut lines = vec![
        ev("r", None, Some((1, "eu", 10))),
        ev("r", None, Some((2, "eu", 20))),
        ev("c", None, Some((3, "us", 30))),
        ev("u", Some((1, "eu", 10)), Some((1, "eu", 11))),
        ev("d", Some((2, "eu", 20)), None),
        // Wrapped by the JSON converter with schemas enabled.
        format!(
            "{{\"schema\": {{\"type\": \"struct\"}}, \"payload\": {}}}",
            ev("u", Some((3, "us", 30)), Some((3, "us", 33)))
        ),
        ev("c", None, Some((2, "eu", 21))),
        // Dead letters: a truncate, an unknown column, a missing key, not an event.
        "{\"op\": \"t\", \"source\": {}}".to_string(),
        "{\"op\": \"c\", \"after\": {\"id\": 9, \"region\": \"eu\", \"nope\": 1}}".to_string(),
        "{\"op\": \"c\", \"after\": {\"region\": \"eu\", \"v\": 1}}".to_string(),
        "{\"id\": 5}".to_string(),
        ev("d", Some((1, "eu", 11)), None),
        ev("c", None, Some((1, "eu", 12))),
    ];
    lines.push(String::new());
    std::fs::write(&input, lines.join("\n")).unwrap();
    let ident = floe::catalog::parse_table_ident("s.cdc").unwrap();
    let mut o = upsert_options("cdc", IngestMode::Cdc);
    o.commit_records = Some(5);
    let s = IngestBuilder::new(
        &fx.catalog,
        ident,
        source::open(&input.display().to_string(), false).unwrap(),
        o,
    )
    .with_dead_letter(
        DeadLetterSink::open(&dead.display().to_string())
            .await
            .unwrap(),
    )
    .execute()
    .await
    .unwrap();
    assert_eq!(s.bad_records, 4, "{s:?}");
    let model: Model = BTreeMap::from([
        ((1, "eu".to_string()), 12),
        ((2, "eu".to_string()), 21),
        ((3, "us".to_string()), 33),
    ]);
    assert_matches_model(&fx, "s.cdc", &model, "the change stream").await;
    assert_readers_match_model(&fx, "s.cdc", &model, "the change stream");
    let dead: Vec<serde_json::Value> = std::fs::read_to_string(&dead)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let reasons: Vec<&str> = dead.iter().map(|d| d["reason"].as_str().unwrap()).collect();
    assert!(reasons[0].contains("truncate"), "{reasons:?}");
    assert!(reasons[1].contains("'nope'"), "{reasons:?}");
    assert!(reasons[2].contains("key column 'id'"), "{reasons:?}");
    assert!(reasons[3].contains("op"), "{reasons:?}");
    // An upsert ingest of a table without a primary key is refused before reading anything.
    fx.table("s.plain", None).await;
    let e = IngestBuilder::new(
        &fx.catalog,
        floe::catalog::parse_table_ident("s.plain").unwrap(),
        source::open(&input.display().to_string(), false).unwrap(),
        upsert_options("plain", IngestMode::Upsert),
    )
    .execute()
    .await
    .unwrap_err()
    .to_string();
    assert!(e.contains("primary key"), "{e}");
}

#[tokio::test]
async fn a_key_changed_from_two_partitions_is_reported_and_stays_one_row() {
    let fx = Fixture::new().await;
    let ident = pk_table(&fx, "s.crossed", false).await;
    let topic = format!("crossed-{}", uuid::Uuid::new_v4().simple());
    let mut records = Vec::new();
    for (partition, v) in [(0, 1), (1, 2), (0, 3)] {
        let value = format!("{{\"id\": 1, \"region\": \"eu\", \"v\": {v}}}");
        records.push((
            partition,
            keyed("{\"id\": 1, \"region\": \"eu\"}".into(), Some(value)),
        ));
        let id = 10 + partition;
        let other = format!("{{\"id\": {id}, \"region\": \"us\", \"v\": {v}}}");
        records.push((partition, keyed(format!("{{\"id\": {id}}}"), Some(other))));
    }
    produce_to(&topic, 2, records, true).await;
    let reports = Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = reports.clone();
    let mut o = upsert_options("crossed", IngestMode::Upsert);
    o.commit_records = None;
    let uri = format!("kafka://{}/{topic}", kafka());
    IngestBuilder::new(&fx.catalog, ident, source::open(&uri, false).unwrap(), o)
        .on_commit(move |r| sink.lock().unwrap().push(r.clone()))
        .execute()
        .await
        .unwrap();
    let crossed: u64 = reports
        .lock()
        .unwrap()
        .iter()
        .map(|r| r.keys_across_streams)
        .sum();
    assert!(crossed >= 1, "the key came from partitions 0 and 1");
    let rows = crate::change::floe_rows(&fx, "s.crossed").await;
    let of_key: Vec<_> = rows.iter().filter(|r| r[0] == "1").collect();
    assert_eq!(of_key.len(), 1, "{rows:?}");
    assert_eq!(rows.len(), 3, "{rows:?}");
}
