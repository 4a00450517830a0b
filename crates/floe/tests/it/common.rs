//! Fixtures: a temporary warehouse with the embedded SQLite catalog, tables, batches, and the
//! independent Python readers.

use floe::operations::{Operation, Query};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, Float64Array, Int32Array, Int64Array, StringArray, TimestampMicrosecondArray,
};
use arrow::datatypes::DataType;
use arrow::record_batch::RecordBatch;
use floe::catalog::{parse_table_ident, Catalog, CatalogConfig, NewTable};
use floe::iceberg::table::Table;
use floe::iceberg::TableIdent;

pub struct Fixture {
    pub _dir: tempfile::TempDir,
    pub config: CatalogConfig,
    pub catalog: Catalog,
}

impl Fixture {
    pub async fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let config = CatalogConfig::embedded(Some(&dir.path().join("warehouse"))).unwrap();
        let catalog = Catalog::connect(&config).await.unwrap();
        Self {
            _dir: dir,
            config,
            catalog,
        }
    }

    /// A second, independent connection (another "process") to the same catalog.
    pub async fn second_connection(&self) -> Catalog {
        Catalog::connect(&self.config).await.unwrap()
    }

    pub fn warehouse(&self) -> &Path {
        Path::new(&self.config.warehouse)
    }

    /// Creates `ns.name` (id bigint not null, ts timestamp, name string, amount double).
    pub async fn table(&self, name: &str, partition: Option<&str>) -> TableIdent {
        let schema = floe::table::schema::parse_schema(
            "id bigint not null, ts timestamp, name string, amount double",
        )
        .unwrap();
        self.create_table(name, schema, partition).await
    }

    /// Creates `ns.name` with `schema`, partitioned by `partition` (spec text), creating the
    /// namespace when needed.
    pub async fn create_table(
        &self,
        name: &str,
        schema: floe::iceberg::spec::Schema,
        partition: Option<&str>,
    ) -> TableIdent {
        self.create_table_with(name, schema, partition, Default::default())
            .await
    }

    /// [`Fixture::create_table`] with table properties (`format-version` picks the format).
    pub async fn create_table_with(
        &self,
        name: &str,
        schema: floe::iceberg::spec::Schema,
        partition: Option<&str>,
        properties: std::collections::HashMap<String, String>,
    ) -> TableIdent {
        let ident = parse_table_ident(name).unwrap();
        let ns = ident.namespace().clone();
        if !self.catalog.namespace_exists(&ns).await.unwrap() {
            self.catalog.create_namespace(&ns).await.unwrap();
        }
        let spec = match partition {
            Some(p) => floe::table::schema::parse_partition(p, &schema).unwrap(),
            None => floe::table::schema::unpartitioned(),
        };
        self.catalog
            .create_table(NewTable {
                ident: ident.clone(),
                schema,
                partition_spec: spec,
                sort_order: None,
                properties,
            })
            .await
            .unwrap();
        ident
    }

    /// Sets one table property.
    pub async fn set_property(&self, ident: &TableIdent, key: &str, value: &str) {
        let props = std::collections::HashMap::from([(key.to_string(), value.to_string())]);
        floe::operations::alter::AlterPropertiesBuilder::new(&self.catalog, ident.clone())
            .with_properties(props)
            .execute()
            .await
            .unwrap();
    }

    /// Runs `tests/interop/pyiceberg_write.py` against this fixture's catalog with `args`
    /// (`--table`, `--rows`, ...), returning what it prints.
    pub fn pyiceberg_write(&self, args: &[&str]) -> serde_json::Value {
        let wh = self.warehouse().display().to_string();
        let uri = format!("sqlite:///{}/catalog.db", wh.trim_start_matches('/'));
        let mut all = vec!["--catalog-uri", &uri, "--warehouse", &wh];
        all.extend_from_slice(args);
        run_python("tests/interop/pyiceberg_write.py", &all)
    }

    pub async fn load(&self, ident: &TableIdent) -> Table {
        self.catalog.load_table(ident).await.unwrap()
    }

    /// Rows with ids `from..to`, over three days.
    pub async fn batch(&self, ident: &TableIdent, from: i64, to: i64) -> RecordBatch {
        let table = self.load(ident).await;
        make_batch(&table, from, to)
    }

    pub async fn append(&self, ident: &TableIdent, from: i64, to: i64) -> i64 {
        let b = self.batch(ident, from, to).await;
        floe::operations::append::AppendBuilder::from_batches(&self.catalog, ident.clone(), vec![b])
            .execute()
            .await
            .unwrap()
            .snapshot_id
            .unwrap()
    }

    /// Tags the current snapshot of `ident` as `name`; returns that snapshot's id.
    pub async fn tag_current(&self, ident: &TableIdent, name: &str) -> i64 {
        let id = self
            .load(ident)
            .await
            .metadata()
            .current_snapshot_id()
            .unwrap();
        floe::operations::refs::CreateRefBuilder::new(&self.catalog, ident.clone())
            .with_tag(name)
            .execute()
            .await
            .unwrap();
        id
    }

    /// (row count, sum of id) of the table's current snapshot, read by floe.
    pub async fn count_and_sum(&self, ident: &TableIdent) -> (i64, i64) {
        count_and_sum(&self.catalog, ident).await
    }
}

/// `count(*)` of `table` rows matching `predicate`, read by floe (its scan prunes files by
/// partition and bounds).
pub async fn count_where(catalog: &Catalog, table: &str, predicate: &str) -> i64 {
    let sql = format!("SELECT count(*) FROM {table} WHERE {predicate}");
    let b = floe::operations::sql::SqlBuilder::new(catalog, &sql)
        .query()
        .await
        .unwrap();
    b[0].column(0)
        .as_any()
        .downcast_ref::<Int64Array>()
        .unwrap()
        .value(0)
}

pub async fn count_and_sum(catalog: &Catalog, ident: &TableIdent) -> (i64, i64) {
    let sql = format!(
        "SELECT count(*) AS n, coalesce(sum(id), 0) AS s FROM {}",
        floe::catalog::ident_string(ident)
    );
    let b = floe::operations::sql::SqlBuilder::new(catalog, &sql)
        .query()
        .await
        .unwrap();
    let n = b[0]
        .column(0)
        .as_any()
        .downcast_ref::<Int64Array>()
        .unwrap()
        .value(0);
    let s = b[0]
        .column(1)
        .as_any()
        .downcast_ref::<Int64Array>()
        .unwrap()
        .value(0);
    (n, s)
}

pub fn make_batch(table: &Table, from: i64, to: i64) -> RecordBatch {
    let schema = Arc::new(
        floe::iceberg::arrow::schema_to_arrow_schema(table.metadata().current_schema()).unwrap(),
    );
    let ids: Vec<i64> = (from..to).collect();
    let day_us = 86_400_000_000i64;
    let base = 1_767_225_600_000_000i64; // 2026-01-01T00:00:00
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from(ids.clone())),
            Arc::new(TimestampMicrosecondArray::from(
                ids.iter()
                    .map(|i| base + (i % 3) * day_us + i * 1_000_000)
                    .collect::<Vec<_>>(),
            )),
            Arc::new(StringArray::from(
                ids.iter()
                    .map(|i| format!("name-{}", i % 7))
                    .collect::<Vec<_>>(),
            )),
            Arc::new(Float64Array::from(
                ids.iter().map(|i| *i as f64 * 0.5).collect::<Vec<_>>(),
            )),
        ],
    )
    .unwrap()
}

/// Rows `from..to` in the table's current schema, each column filled by its type (so the batch
/// follows the schema as it evolves); `ts` spreads rows over 3 days, one hour per 3600 ids.
pub async fn rows(fx: &Fixture, ident: &TableIdent, from: i64, to: i64) -> RecordBatch {
    let table = fx.load(ident).await;
    let schema = Arc::new(
        floe::iceberg::arrow::schema_to_arrow_schema(table.metadata().current_schema()).unwrap(),
    );
    let ids: Vec<i64> = (from..to).collect();
    let base = 1_767_225_600_000_000i64; // 2026-01-01T00:00:00
    let columns: Vec<ArrayRef> = schema
        .fields()
        .iter()
        .map(|f| -> ArrayRef {
            match f.data_type() {
                DataType::Int64 => Arc::new(Int64Array::from(ids.clone())),
                DataType::Int32 => Arc::new(Int32Array::from(
                    ids.iter().map(|i| (*i % 1000) as i32).collect::<Vec<_>>(),
                )),
                DataType::Float64 => Arc::new(Float64Array::from(
                    ids.iter().map(|i| *i as f64 * 0.5).collect::<Vec<_>>(),
                )),
                DataType::Utf8 => Arc::new(StringArray::from(
                    ids.iter()
                        .map(|i| format!("{}-{}", f.name(), i % 7))
                        .collect::<Vec<_>>(),
                )),
                DataType::Timestamp(_, _) => Arc::new(TimestampMicrosecondArray::from(
                    ids.iter()
                        .map(|i| base + (i % 3) * 86_400_000_000 + i * 1_000_000)
                        .collect::<Vec<_>>(),
                )),
                other => panic!("no generator for {other}"),
            }
        })
        .collect();
    RecordBatch::try_new(schema, columns).unwrap()
}

pub fn sum_ids(from: i64, to: i64) -> i64 {
    (from..to).sum()
}

/// Path of the Python interpreter with PyIceberg and DuckDB, or `None` when not set up.
pub fn python() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("FLOE_PYTHON") {
        return Some(PathBuf::from(p));
    }
    let default = PathBuf::from("/var/tmp/floe-venv/bin/python");
    default.exists().then_some(default)
}

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// Runs one of the interop scripts and parses its JSON output.
pub fn run_python(script: &str, args: &[&str]) -> serde_json::Value {
    let py = python().expect("interop tests need FLOE_PYTHON (run .ci/setup)");
    let out = Command::new(py)
        .arg(repo_root().join(script))
        .args(args)
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "{script} failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{script} printed no JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// Reads `table` of the fixture's catalog with PyIceberg and DuckDB (rows, sum of id, live
/// files, content checksum per reader).
pub fn read_with_python(fx: &Fixture, table: &str) -> serde_json::Value {
    read_catalog_with_python(fx.warehouse(), table)
}

/// Same as [`read_with_python`] for any warehouse with the embedded catalog layout.
pub fn read_catalog_with_python(warehouse: &Path, table: &str) -> serde_json::Value {
    read_catalog_with_readers(warehouse, table, "pyiceberg,duckdb")
}

/// [`read_catalog_with_python`] by some of the readers only (`pyiceberg`, `duckdb`,
/// comma-separated): the others' keys are absent from the answer.
pub fn read_catalog_with_readers(
    warehouse: &Path,
    table: &str,
    readers: &str,
) -> serde_json::Value {
    let wh = warehouse.display().to_string();
    let uri = format!("sqlite:///{}/catalog.db", wh.trim_start_matches('/'));
    run_python(
        "tests/interop/read_table.py",
        &[
            "--catalog-uri",
            &uri,
            "--warehouse",
            &wh,
            "--table",
            table,
            "--sum-column",
            "id",
            "--readers",
            readers,
        ],
    )
}

/// Rewrites every live data file of the table into new files (a minimal compaction through the
/// library's rewrite producer), returning (files before, files after).
pub async fn rewrite_all(catalog: &Catalog, ident: &TableIdent) -> (usize, usize) {
    use futures::TryStreamExt;
    let table = catalog.load_table(ident).await.unwrap();
    let live = floe::table::manifests::live_files(&table).await.unwrap();
    let schema = Arc::new(
        floe::iceberg::arrow::schema_to_arrow_schema(table.metadata().current_schema()).unwrap(),
    );
    let batches: Vec<RecordBatch> = table
        .scan()
        .build()
        .unwrap()
        .to_arrow()
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let batches = batches
        .into_iter()
        .map(|b| RecordBatch::try_new(schema.clone(), b.columns().to_vec()).unwrap())
        .collect();
    let files = floe::operations::append::write_files(&table, batches, &Default::default())
        .await
        .unwrap();
    let after = files.len();
    let removed = live
        .iter()
        .map(|f| f.file.file_path().to_string())
        .collect();
    let update = floe::commit::SnapshotUpdate::rewrite(&table, removed, files);
    floe::commit::Committer::new(catalog, ident)
        .commit(update)
        .await
        .unwrap();
    (live.len(), after)
}

/// Commits raw metadata `updates` on `table`, below floe's validation (what another engine, or
/// an older floe, may have written), through the one commit API.
pub async fn commit_raw(
    catalog: &Catalog,
    table: &Table,
    updates: Vec<floe::iceberg::TableUpdate>,
) -> Table {
    floe::commit::Committer::new(catalog, table.identifier())
        .on(table.clone())
        .repairing()
        .commit_with(floe::commit::action::properties::on_every_attempt(updates))
        .await
        .unwrap()
        .table
}

/// Every regular file under `dir` (not following symlinks).
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let t = e.file_type().unwrap();
        if t.is_dir() {
            out.extend(files_under(&e.path()));
        } else if t.is_file() {
            out.push(e.path());
        }
    }
    out.sort();
    out
}

/// What a plan must leave alone: the table's metadata file, and every file under its location.
pub async fn table_state(fx: &Fixture, ident: &TableIdent) -> (Option<String>, Vec<PathBuf>) {
    let t = fx.load(ident).await;
    let dir = PathBuf::from(t.metadata().location().trim_start_matches("file://"));
    (t.metadata_location().map(str::to_string), files_under(&dir))
}

/// An operation's report as JSON, without what differs between the same run on two tables of
/// the same rows: the table's name, the snapshot id, the duration, and byte sizes at any depth
/// (files name the table's own paths, in their rows and their Parquet metadata).
pub fn outcome(report: &impl serde::Serialize) -> serde_json::Value {
    fn strip(v: &mut serde_json::Value, top: bool) {
        match v {
            serde_json::Value::Object(o) => {
                let run_specific = |k: &str| {
                    k.contains("bytes")
                        || (top && matches!(k, "table" | "snapshot_id" | "duration_ms"))
                };
                o.retain(|k, _| !run_specific(k));
                o.values_mut().for_each(|v| strip(v, false));
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(|v| strip(v, false)),
            _ => {}
        }
    }
    let mut v = serde_json::to_value(report).unwrap();
    strip(&mut v, true);
    v
}

/// `tests/interop/plan_files.py`: the data files PyIceberg's planning keeps per filter, and
/// the matching rows it reads (and the row groups of the files it plans).
pub fn plan_files(fx: &Fixture, table: &str, filters: &[&str]) -> serde_json::Value {
    let wh = fx.warehouse().display().to_string();
    let uri = format!("sqlite:///{}/catalog.db", wh.trim_start_matches('/'));
    let mut args = vec!["--catalog-uri", &uri, "--warehouse", &wh, "--table", table];
    for f in filters {
        args.extend(["--filter", f]);
    }
    run_python("tests/interop/plan_files.py", &args)
}

/// `tests/interop/read_refs.py`: the refs PyIceberg sees and what it reads at `read` refs.
pub fn read_refs(fx: &Fixture, table: &str, read: &[&str]) -> serde_json::Value {
    let wh = fx.warehouse().display().to_string();
    let uri = format!("sqlite:///{}/catalog.db", wh.trim_start_matches('/'));
    let mut args = vec!["--catalog-uri", &uri, "--warehouse", &wh, "--table", table];
    for r in read {
        args.extend(["--read", r]);
    }
    run_python("tests/interop/read_refs.py", &args)
}
