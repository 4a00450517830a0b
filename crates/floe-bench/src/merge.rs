//! `row-group-merge`: compaction of inputs with large row groups, copying them without decoding
//! (`row-group-merge=always`) against decoding and re-encoding them (`never`), on identical
//! tables (built first, outside the timing), alternating, in this process; rows are checked
//! after every run.

use floe::operations::Operation;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Result};
use floe::catalog::{Catalog, CatalogConfig};
use floe::operations::compact::CompactBuilder;
use serde_json::json;

pub async fn run(files: usize, rows: i64, runs: usize, dir: Option<PathBuf>) -> Result<()> {
    let tmp = tempfile::tempdir()?;
    let root = dir.unwrap_or_else(|| tmp.path().to_path_buf());
    let source = root.join("source");
    if source.exists() {
        std::fs::remove_dir_all(&source)?;
    }
    let config = CatalogConfig::embedded(Some(&source))?;
    let catalog = Catalog::connect(&config).await?;
    let mut tables = Vec::new();
    let mut input_bytes = 0;
    for run in 0..runs {
        for mode in ["never", "always"] {
            let name = format!("bench.wide_{run}_{mode}");
            let ident = build(&catalog, &name, files, rows).await?;
            let table = catalog.load_table(&ident).await?;
            let live = floe::table::manifests::live_files(&table).await?;
            input_bytes = live.iter().map(|f| f.file.file_size_in_bytes()).sum();
            tables.push((mode, ident));
        }
    }

    let mut times: std::collections::BTreeMap<&str, Vec<f64>> = Default::default();
    let mut copied_groups = 0;
    for (mode, ident) in tables {
        let started = Instant::now();
        let m = CompactBuilder::new(&catalog, ident.clone())
            .with_option("row-group-merge", mode)
            .with_option("rewrite-all", "true")
            .with_option("target-file-size-bytes", "4GiB")
            .execute()
            .await?;
        let secs = started.elapsed().as_secs_f64();
        if m.rows != files as u64 * rows as u64 || m.added_files != 1 {
            bail!("{mode}: wrote {} rows into {} files", m.rows, m.added_files);
        }
        if mode == "always" {
            copied_groups = m.row_group_merge.row_groups;
            if m.row_group_merge.files != files as u64 {
                bail!("always copied {} of {files} files", m.row_group_merge.files);
            }
        }
        times.entry(mode).or_default().push(secs);
    }
    let mut never = times["never"].clone();
    let mut always = times["always"].clone();
    let (dm, cm) = (crate::median(&mut never), crate::median(&mut always));
    let mb = input_bytes as f64 / 1e6;
    println!(
        "{:>8} {:>10} {:>14} {:>14} {:>8}",
        "files", "input MB", "decode med s", "copy med s", "ratio"
    );
    println!(
        "{files:>8} {mb:>10.1} {dm:>14.3} {cm:>14.3} {:>7.1}x",
        dm / cm
    );
    println!(
        "{}",
        serde_json::to_string_pretty(&json!({
            "benchmark": "row-group-merge", "files": files, "rows_per_file": rows,
            "input_bytes": input_bytes, "copied_row_groups": copied_groups,
            "decode_s": times["never"], "copy_s": times["always"],
            "decode_median_s": dm, "copy_median_s": cm, "copy_speedup": dm / cm,
            "decode_mb_per_s": mb / dm, "copy_mb_per_s": mb / cm,
        }))?
    );
    Ok(())
}

/// A table of `files` appends of `rows` rows, one row group each.
async fn build(
    catalog: &Catalog,
    name: &str,
    files: usize,
    rows: i64,
) -> Result<floe::iceberg::TableIdent> {
    let (table, schema) = crate::history::create_table(
        catalog,
        name,
        "id bigint not null, ts timestamp, name string, amount double",
        None,
    )
    .await?;
    let ident = table.identifier().clone();
    floe::operations::alter::AlterPropertiesBuilder::new(catalog, ident.clone())
        .with_property("write.parquet.row-group-size-bytes", "1073741824")
        .execute()
        .await?;
    for f in 0..files {
        let from = f as i64 * rows;
        let mut batches = Vec::new();
        let mut at = 0;
        while at < rows {
            let n = (rows - at).min(65_536);
            batches.push(crate::batch(&schema, from + at, n));
            at += n;
        }
        floe::operations::append::AppendBuilder::from_batches(catalog, ident.clone(), batches)
            .execute()
            .await?;
    }
    Ok(ident)
}
