//! Tables with long histories, built fast: snapshots are produced by floe's own producer on an
//! in-memory copy of the table and committed 1,000 at a time (one metadata.json write instead
//! of 1,000). The table ends up exactly as separate appends would leave it: same snapshots,
//! manifests (merged per floe's policy) and files.

use std::future::Future;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::Result;
use arrow::array::{Int32Array, Int64Array, StringArray};
use arrow::record_batch::RecordBatch;
use floe::catalog::{parse_table_ident, Catalog, CatalogConfig, NewTable};
use floe::iceberg::spec::{DataFile, DataFileBuilder, TableMetadataBuilder};
use floe::iceberg::table::Table;
use floe::storage::listing::local_dir;
use serde_json::json;

/// Appends `n` snapshots whose files `make_files(table, i)` provides.
pub async fn append_snapshots<F, Fut>(
    catalog: &Catalog,
    ident: &floe::iceberg::TableIdent,
    n: usize,
    mut make_files: F,
) -> Result<()>
where
    F: FnMut(Table, usize) -> Fut,
    Fut: Future<Output = Result<Vec<DataFile>>>,
{
    let mut base = catalog.load_table(ident).await?;
    let mut mem = base.clone();
    let mut pending = Vec::new();
    for i in 0..n {
        let files = make_files(mem.clone(), i).await?;
        let prepared =
            floe::commit::producer::prepare(&mem, &floe::commit::SnapshotUpdate::append(files))
                .await?;
        let mut builder = TableMetadataBuilder::new_from_metadata(mem.metadata().clone(), None);
        for u in prepared.updates.clone() {
            builder = u.apply(builder)?;
        }
        mem = Table::builder()
            .identifier(ident.clone())
            .metadata(builder.build()?.metadata)
            .metadata_location(base.metadata_location().unwrap_or_default())
            .file_io(base.file_io().clone())
            .runtime(floe::iceberg::Runtime::current())
            .build()?;
        pending.extend(prepared.updates);
        if pending.len() >= 1000 || i + 1 == n {
            let updates = std::mem::take(&mut pending);
            base = floe::commit::Committer::new(catalog, ident)
                .on(base)
                .commit_with(floe::commit::action::properties::on_every_attempt(updates))
                .await?
                .table;
            mem = base.clone();
        }
    }
    Ok(())
}

/// Creates table `name` (its namespace too when missing) with `columns` and an optional
/// partition spec; returns it and its Arrow schema.
pub async fn create_table(
    catalog: &Catalog,
    name: &str,
    columns: &str,
    partition: Option<&str>,
) -> Result<(Table, arrow::datatypes::SchemaRef)> {
    let ident = parse_table_ident(name)?;
    if !catalog.namespace_exists(ident.namespace()).await? {
        catalog.create_namespace(ident.namespace()).await?;
    }
    let schema = floe::table::schema::parse_schema(columns)?;
    let partition_spec = match partition {
        Some(p) => floe::table::schema::parse_partition(p, &schema)?,
        None => floe::table::schema::unpartitioned(),
    };
    let table = catalog
        .create_table(NewTable {
            ident,
            schema,
            partition_spec,
            sort_order: None,
            properties: Default::default(),
        })
        .await?;
    let arrow_schema = std::sync::Arc::new(floe::iceberg::arrow::schema_to_arrow_schema(
        table.metadata().current_schema(),
    )?);
    Ok((table, arrow_schema))
}

/// A copy of `template` at `path` (hard link) with the same partition and counts.
fn linked_copy(template: &DataFile, spec_id: i32, path: String) -> Result<DataFile> {
    std::fs::hard_link(
        local_dir(template.file_path()).expect("local warehouse"),
        local_dir(&path).expect("local warehouse"),
    )?;
    Ok(DataFileBuilder::default()
        .content(template.content_type())
        .file_path(path)
        .file_format(template.file_format())
        .partition(template.partition().clone())
        .partition_spec_id(spec_id)
        .record_count(template.record_count())
        .file_size_in_bytes(template.file_size_in_bytes())
        .build()?)
}

/// `history`: table `bench.history` (id, p, payload; partitioned by identity(p)) with `files`
/// live data files over `snapshots` appends, one file per partition per snapshot, plus
/// `orphans` uncommitted files. Prints the table location and build time as JSON.
pub async fn build(
    warehouse: PathBuf,
    files: usize,
    snapshots: usize,
    orphans: usize,
) -> Result<()> {
    let started = Instant::now();
    let config = CatalogConfig::embedded(Some(&warehouse))?;
    let catalog = Catalog::connect(&config).await?;
    let ident = parse_table_ident("bench.history")?;
    let (table, arrow_schema) = create_table(
        &catalog,
        "bench.history",
        "id bigint not null, p int not null, payload string",
        Some("p"),
    )
    .await?;
    let parts = (files / snapshots.max(1)).max(1);
    let rows = parts * 20;
    let batch = RecordBatch::try_new(
        arrow_schema,
        vec![
            std::sync::Arc::new(Int64Array::from((0..rows as i64).collect::<Vec<_>>())),
            std::sync::Arc::new(Int32Array::from(
                (0..rows).map(|r| (r % parts) as i32).collect::<Vec<_>>(),
            )),
            std::sync::Arc::new(StringArray::from(
                (0..rows)
                    .map(|r| format!("payload-{r}"))
                    .collect::<Vec<_>>(),
            )),
        ],
    )?;
    // One real Parquet file per partition; every snapshot links fresh copies of them.
    let templates =
        floe::operations::append::write_files(&table, vec![batch], &Default::default()).await?;
    let location = table.metadata().location().to_string();
    let spec_id = table.metadata().default_partition_spec_id();
    append_snapshots(&catalog, &ident, snapshots, |_, i| {
        let templates = templates.clone();
        let location = location.clone();
        async move {
            templates
                .iter()
                .enumerate()
                .map(|(k, t)| {
                    linked_copy(
                        t,
                        spec_id,
                        format!("{location}/data/h-{i:05}-{k:04}.parquet"),
                    )
                })
                .collect()
        }
    })
    .await?;
    for o in 0..orphans {
        let t = &templates[o % templates.len()];
        linked_copy(t, spec_id, format!("{location}/data/orphan-{o:06}.parquet"))?;
    }
    println!(
        "{}",
        json!({
            "table": "bench.history", "location": location, "live_files": parts * snapshots,
            "snapshots": snapshots, "orphans": orphans + templates.len(),
            "build_seconds": started.elapsed().as_secs_f64(),
        })
    );
    Ok(())
}
