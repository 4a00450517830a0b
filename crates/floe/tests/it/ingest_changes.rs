//! `ingest --mode upsert|cdc` (DESIGN section 5, invariant 4 for upserts and CDC): a table fed
//! changes equals a reference model (a map by key fed the same changes) after every run,
//! across restarts and a crash between writing and committing, after compaction and expiry,
//! read by floe, PyIceberg and DuckDB; bad changes are dead letters.

use floe::operations::{Operation, Query};
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

    floe::operations::compact::CompactBuilder::new(&fx.catalog, ident.clone())
        .with_option("rewrite-all", "true")
        .execute()
        .await
        .unwrap();
    assert_eq!(delete_files(&fx, &ident).await, 0);
    floe::operations::expire::ExpireBuilder::new(&fx.catalog, ident.clone())
        .with_older_than_age(Duration::ZERO)
        .with_retain_last(1)
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

/// The schema Debezium's JSON converter sends with each event (`schemas.enable=true`) for a
/// row of `cols` (each a Connect field as JSON text).
fn debezium_schema(cols: &[&str]) -> String {
    let row = |side: &str| {
        format!(
            "{{\"type\":\"struct\",\"fields\":[{}],\"optional\":true,\"name\":\"pg.public.prices.Value\",\"field\":\"{side}\"}}",
            cols.join(",")
        )
    };
    format!(
        "{{\"type\":\"struct\",\"fields\":[{},{},{{\"type\":\"struct\",\"fields\":[{{\"type\":\"string\",\"optional\":false,\"field\":\"version\"}},{{\"type\":\"string\",\"optional\":false,\"field\":\"connector\"}},{{\"type\":\"int64\",\"optional\":true,\"field\":\"lsn\"}}],\"optional\":false,\"name\":\"io.debezium.connector.postgresql.Source\",\"field\":\"source\"}},{{\"type\":\"string\",\"optional\":false,\"field\":\"op\"}},{{\"type\":\"int64\",\"optional\":true,\"field\":\"ts_ms\"}}],\"optional\":false,\"name\":\"pg.public.prices.Envelope\",\"version\":2}}",
        row("before"),
        row("after")
    )
}

/// A Debezium change event; wrapped with `schema` when it is given.
fn debezium_event(schema: Option<&str>, op: &str, before: &str, after: &str) -> String {
    let payload = format!(
        "{{\"before\":{before},\"after\":{after},\"source\":{{\"version\":\"2.7.0.Final\",\"connector\":\"postgresql\",\"lsn\":1}},\"op\":\"{op}\",\"ts_ms\":1767261600000}}"
    );
    match schema {
        Some(s) => format!("{{\"schema\":{s},\"payload\":{payload}}}"),
        None => payload,
    }
}

#[tokio::test]
async fn debezium_default_encodings_are_read_exactly_from_the_event_schema_and_never_guessed_without_it(
) {
    use base64::Engine;
    let fx = Fixture::new().await;
    let schema = floe::table::schema::parse_schema(
        "id bigint not null, price decimal(12,2), ts timestamp, ts_ns timestamp, ts_ms timestamptz, d date, t_ms time, t time, t_ns time, zts timestamptz",
    )
    .unwrap();
    let schema = floe::table::schema::with_primary_key(schema, "id").unwrap();
    let ident = fx.create_table("s.prices", schema, None).await;
    let field = |name: &str, ty: &str, logical: &str| {
        format!("{{\"type\":\"{ty}\",\"optional\":true,\"name\":\"{logical}\",\"version\":1,\"field\":\"{name}\"}}")
    };
    let decimal_field = |scale: u32| {
        format!("{{\"type\":\"bytes\",\"optional\":true,\"name\":\"org.apache.kafka.connect.data.Decimal\",\"version\":1,\"parameters\":{{\"scale\":\"{scale}\",\"connect.decimal.precision\":\"12\"}},\"field\":\"price\"}}")
    };
    let cols = |scale: u32| {
        vec![
            "{\"type\":\"int64\",\"optional\":false,\"field\":\"id\"}".to_string(),
            decimal_field(scale),
            field("ts", "int64", "io.debezium.time.MicroTimestamp"),
            field("ts_ns", "int64", "io.debezium.time.NanoTimestamp"),
            field("ts_ms", "int64", "io.debezium.time.Timestamp"),
            field("d", "int32", "io.debezium.time.Date"),
            field("t_ms", "int32", "io.debezium.time.Time"),
            field("t", "int64", "io.debezium.time.MicroTime"),
            field("t_ns", "int64", "io.debezium.time.NanoTime"),
            field("zts", "string", "io.debezium.time.ZonedTimestamp"),
        ]
    };
    let refs = |v: &[String]| debezium_schema(&v.iter().map(String::as_str).collect::<Vec<_>>());
    let with_schema = refs(&cols(2));
    let scale3 = refs(&cols(3));
    let b64 = |unscaled: i128| {
        let bytes = unscaled.to_be_bytes();
        // Debezium sends the shortest two's complement.
        let skip = bytes
            .windows(2)
            .take_while(|w| (w[0] == 0 && w[1] & 0x80 == 0) || (w[0] == 0xff && w[1] & 0x80 != 0))
            .count();
        base64::engine::general_purpose::STANDARD.encode(&bytes[skip..])
    };
    // 2026-01-01T10:00:00Z and a fraction with every digit used.
    let row = |id: i64, unscaled: i128, micros: i64| {
        format!(
            "{{\"id\":{id},\"price\":\"{}\",\"ts\":{micros},\"ts_ns\":{},\"ts_ms\":{},\"d\":{},\"t_ms\":36000123,\"t\":36000123456,\"t_ns\":36000123456000,\"zts\":\"2026-01-01T12:00:00.123456+02:00\"}}",
            b64(unscaled),
            micros as i128 * 1000,
            micros / 1000,
            micros.div_euclid(86_400_000_000)
        )
    };
    let s = Some(with_schema.as_str());
    let lines = [
        debezium_event(s, "r", "null", &row(1, 12345, 1_767_261_600_123_456)),
        debezium_event(s, "c", "null", &row(2, -99_999_999_999, -1)),
        debezium_event(s, "c", "null", &row(3, 5, 0)),
        debezium_event(s, "u", &row(3, 5, 0), &row(3, 700, 86_400_000_000)),
        debezium_event(s, "c", "null", &row(4, 1, 1)),
        debezium_event(s, "d", &row(4, 1, 1), "null"),
        // Bad: a scale the column cannot hold (cut digits), a sub-microsecond digit of a
        // NanoTimestamp into a microsecond column, an unscaled value beyond 38 digits.
        debezium_event(Some(&scale3), "c", "null", &row(5, 12345, 0)),
        debezium_event(
            s,
            "c",
            "null",
            &row(6, 1, 0).replace("\"t_ns\":36000123456000", "\"t_ns\":36000123456001"),
        ),
        debezium_event(
            s,
            "c",
            "null",
            &row(7, 1, 0).replace(
                &format!("\"price\":\"{}\"", b64(1)),
                "\"price\":\"AQAAAAAAAAAAAAAAAAAAAAAA\"",
            ),
        ),
        // Bad: no schema, so neither the integer timestamp nor the base64 decimal is guessed.
        debezium_event(None, "c", "null", "{\"id\":8,\"ts\":1767261600123456}"),
        debezium_event(
            None,
            "c",
            "null",
            &format!("{{\"id\":9,\"price\":\"{}\"}}", b64(12345)),
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("debezium.ndjson");
    std::fs::write(&input, lines.join("\n") + "\n").unwrap();
    let dead = dir.path().join("dead.ndjson");
    let s = IngestBuilder::new(
        &fx.catalog,
        ident,
        source::open(&input.display().to_string(), false).unwrap(),
        upsert_options("debezium", IngestMode::Cdc),
    )
    .with_dead_letter(
        DeadLetterSink::open(&dead.display().to_string())
            .await
            .unwrap(),
    )
    .execute()
    .await
    .unwrap();
    let dead: Vec<serde_json::Value> = std::fs::read_to_string(&dead)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let reasons: Vec<String> = dead
        .iter()
        .map(|d| format!("{} {}", d["column"], d["reason"]))
        .collect();
    assert_eq!(s.bad_records, 5, "{reasons:#?}");
    assert!(reasons[0].contains("price"), "{reasons:?}");
    assert!(reasons[1].contains("t_ns"), "{reasons:?}");
    assert!(
        reasons[2].contains("price") && reasons[2].contains("38 digits"),
        "{reasons:?}"
    );
    for r in &reasons[3..] {
        assert!(r.contains("no schema"), "{reasons:?}");
    }
    assert!(reasons[3].contains("\"ts\""), "{reasons:?}");
    assert!(reasons[4].contains("\"price\""), "{reasons:?}");

    let b = floe::operations::sql::SqlBuilder::new(&fx.catalog, "SELECT id, CAST(price AS VARCHAR) AS price, CAST(ts AS BIGINT) AS ts, CAST(ts_ns AS BIGINT) AS ts_ns, \
         CAST(ts_ms AS BIGINT) AS ts_ms, CAST(d AS VARCHAR) AS d, CAST(t_ms AS VARCHAR) AS t_ms, \
         CAST(t AS VARCHAR) AS t, CAST(t_ns AS VARCHAR) AS t_ns, CAST(zts AS BIGINT) AS zts FROM s.prices ORDER BY id").query()
    .await
    .unwrap();
    let text = arrow::util::pretty::pretty_format_batches(&b)
        .unwrap()
        .to_string();
    let got: Vec<Vec<String>> = text
        .lines()
        .filter(|l| l.starts_with("| ") && !l.contains("price"))
        .map(|l| {
            l.split('|')
                .map(|c| c.trim().to_string())
                .filter(|c| !c.is_empty())
                .collect()
        })
        .collect();
    let row_text = |id: &str, price: &str, micros: i64| {
        vec![
            id.to_string(),
            price.to_string(),
            micros.to_string(),
            micros.to_string(),
            (micros / 1000 * 1000).to_string(),
            chrono::DateTime::from_timestamp_micros(micros)
                .unwrap()
                .date_naive()
                .to_string(),
            "10:00:00.123".to_string(),
            "10:00:00.123456".to_string(),
            "10:00:00.123456".to_string(),
            "1767261600123456".to_string(),
        ]
    };
    assert_eq!(
        got,
        vec![
            row_text("1", "123.45", 1_767_261_600_123_456),
            row_text("2", "-999999999.99", -1),
            row_text("3", "7.00", 86_400_000_000),
        ],
        "{text}"
    );
}

/// Debezium events (create/update/delete) for `ops`, one NDJSON line each, given the model as
/// it stands before each op (an update carries its `before`).
fn debezium_lines(model: &mut Model, ops: &[Op]) -> Vec<String> {
    let row = |(id, region): &(i64, String), v: i64| {
        format!("{{\"id\": {id}, \"region\": \"{region}\", \"v\": {v}}}")
    };
    let mut out = Vec::new();
    for (key, v) in ops {
        let before = model.get(key).copied();
        let line = match (before, v) {
            (None, Some(v)) => format!(
                "{{\"before\": null, \"after\": {}, \"op\": \"c\"}}",
                row(key, *v)
            ),
            (Some(b), Some(v)) => format!(
                "{{\"before\": {}, \"after\": {}, \"op\": \"u\"}}",
                row(key, b),
                row(key, *v)
            ),
            (Some(b), None) => {
                format!(
                    "{{\"before\": {}, \"after\": null, \"op\": \"d\"}}",
                    row(key, b)
                )
            }
            (None, None) => continue,
        };
        out.push(line);
        apply(model, std::slice::from_ref(&((key.clone()), *v)));
    }
    out
}

#[tokio::test]
async fn cdc_and_upsert_ingest_into_a_v3_table_write_deletion_vectors_one_per_data_file() {
    use floe::iceberg::spec::{DataContentType, DataFileFormat};
    let fx = Fixture::new().await;
    let ident = pk_table(&fx, "s.v3cdc", true).await;
    floe::operations::alter::format::UpgradeFormatBuilder::new(&fx.catalog, ident.clone())
        .with_format_version(3)
        .execute()
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Lcg(31);
    let mut model = Model::new();
    for (run, mode) in [IngestMode::Cdc, IngestMode::Upsert, IngestMode::Cdc]
        .into_iter()
        .enumerate()
    {
        let ops = random_ops(&mut rng, 400, run as i64 * 1000);
        let input = dir.path().join(format!("run{run}.ndjson"));
        let lines = match mode {
            IngestMode::Cdc => debezium_lines(&mut model, &ops),
            _ => {
                // Upsert mode: rows, and deletes as rows marked `__deleted`.
                let lines = ops
                    .iter()
                    .map(|((id, region), v)| match v {
                        Some(v) => format!("{{\"id\": {id}, \"region\": \"{region}\", \"v\": {v}}}"),
                        None => format!(
                            "{{\"id\": {id}, \"region\": \"{region}\", \"v\": 0, \"__deleted\": \"true\"}}"
                        ),
                    })
                    .collect();
                apply(&mut model, &ops);
                lines
            }
        };
        std::fs::write(&input, lines.join("\n") + "\n").unwrap();
        let mut o = upsert_options(&format!("w{run}"), mode);
        o.commit_records = Some(50);
        let s = IngestBuilder::new(
            &fx.catalog,
            ident.clone(),
            source::open(&input.display().to_string(), false).unwrap(),
            o,
        )
        .execute()
        .await
        .unwrap();
        assert_eq!(s.bad_records, 0, "{s:?}");
        assert_matches_model(&fx, "s.v3cdc", &model, &format!("run {run}")).await;
    }
    // Only deletion vectors, at most one per data file; row lineage advanced with each commit.
    let t = fx.load(&ident).await;
    let live = floe::table::manifests::live_files(&t).await.unwrap();
    let mut referenced: Vec<String> = live
        .iter()
        .filter(|f| f.file.content_type() == DataContentType::PositionDeletes)
        .map(|f| {
            assert_eq!(
                f.file.file_format(),
                DataFileFormat::Puffin,
                "no Parquet position delete file on v3"
            );
            f.file.referenced_data_file().unwrap()
        })
        .collect();
    assert!(!referenced.is_empty(), "updates and deletes left vectors");
    let n = referenced.len();
    referenced.sort();
    referenced.dedup();
    assert_eq!(
        referenced.len(),
        n,
        "at most one deletion vector per data file"
    );
    assert!(t.metadata().next_row_id() > 0);
    assert!(live
        .iter()
        .filter(|f| f.file.content_type() == DataContentType::Data)
        .all(|f| f.first_row_id.is_some()));
    assert_readers_match_model(&fx, "s.v3cdc", &model, "v3 ingest");
    // Compaction folds the vectors in; the rows stay the model's.
    floe::operations::compact::CompactBuilder::new(&fx.catalog, ident.clone())
        .with_option("rewrite-all", "true")
        .execute()
        .await
        .unwrap();
    assert_matches_model(&fx, "s.v3cdc", &model, "compaction").await;
    assert_readers_match_model(&fx, "s.v3cdc", &model, "compaction");
}
