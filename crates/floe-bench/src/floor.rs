//! `ingest-floor`: the physical limit of ingesting an NDJSON file on this machine, stage by
//! stage on one core, each stage's fastest of several runs:
//!
//! 1. splitting the file into lines (`memchr`-speed, the floor of any reader);
//! 2. JSON to Arrow with floe's strict decoder on one thread
//!    ([`floe::records::decode::decode_run`]: the record rule, checked conversions, dead
//!    letters), and with arrow-json's as a reference (no duplicate-key or exactness checks);
//! 3. Parquet encoding of those batches with floe's default writer settings (zstd level 1,
//!    row groups as `write.parquet.row-group-size-bytes` gives), into memory.
//!
//! Stages 2 and 3 are per-record work that splits across cores, so the floor of an ingest on
//! `n` cores is about (1 + 2 + 3) / n, before any file I/O, partitioning or commit.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use arrow::record_batch::RecordBatch;
use parquet::arrow::ArrowWriter;
use serde_json::json;

/// The fastest of `runs` timings of `f` (seconds) and its last result.
fn fastest<T>(runs: usize, mut f: impl FnMut() -> Result<T>) -> Result<(f64, T)> {
    let mut best = f64::MAX;
    let mut last = None;
    for _ in 0..runs.max(1) {
        let t = Instant::now();
        let out = f()?;
        best = best.min(t.elapsed().as_secs_f64());
        last = Some(out);
    }
    Ok((best, last.expect("at least one run")))
}

pub fn run(input: PathBuf, schema: String, batch: usize, runs: usize) -> Result<()> {
    let bytes = std::fs::read(&input).with_context(|| format!("reading {}", input.display()))?;
    let iceberg_schema = floe::table::schema::parse_schema(&schema)?;
    let arrow_schema = Arc::new(floe::iceberg::arrow::schema_to_arrow_schema(
        &iceberg_schema,
    )?);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());

    let (split_s, lines) = fastest(runs, || {
        let mut lines: Vec<&[u8]> = Vec::new();
        let mut from = 0;
        for end in memchr::memchr_iter(b'\n', &bytes).chain([bytes.len()]) {
            if end > from {
                lines.push(&bytes[from..end]);
            }
            from = end + 1;
        }
        Ok(lines)
    })?;
    let records = lines.len();

    let (floe_s, batches) = fastest(runs, || {
        let mut out: Vec<RecordBatch> = Vec::new();
        for chunk in lines.chunks(batch.max(1)) {
            let d = floe::records::decode::decode_run(&arrow_schema, chunk);
            if let Some((i, reason)) = d.bad.first() {
                bail!("record {i} of a chunk is bad: {reason:?}");
            }
            out.extend(d.batch);
        }
        Ok(out)
    })?;
    let decoded: usize = batches.iter().map(|b| b.num_rows()).sum();
    if decoded != records {
        bail!("floe decoded {decoded} of {records} records");
    }

    let (arrow_json_s, arrow_rows) = fastest(runs, || {
        let mut decoder = arrow::json::ReaderBuilder::new(arrow_schema.clone())
            .with_batch_size(batch.max(1))
            .build_decoder()?;
        let mut rows = 0usize;
        let mut rest: &[u8] = &bytes;
        while !rest.is_empty() {
            let n = decoder.decode(rest)?;
            rest = &rest[n..];
            if let Some(b) = decoder.flush()? {
                rows += b.num_rows();
            }
        }
        if let Some(b) = decoder.flush()? {
            rows += b.num_rows();
        }
        Ok(rows)
    })?;
    if arrow_rows != records {
        bail!("arrow-json decoded {arrow_rows} of {records} records");
    }

    // floe's defaults (a table without write properties): zstd level 1, 128 MiB row groups.
    let props = floe::write::parquet_properties_from(
        &Default::default(),
        floe::base::properties::WRITE_PARQUET_ROW_GROUP_SIZE_BYTES_DEFAULT,
    )?;
    let (encode_s, parquet_bytes) = fastest(runs, || {
        let mut w = ArrowWriter::try_new(Vec::new(), arrow_schema.clone(), Some(props.clone()))?;
        for b in &batches {
            w.write(b)?;
        }
        Ok(w.into_inner()?.len())
    })?;

    let per_core = split_s + floe_s + encode_s;
    let mb = bytes.len() as f64 / 1e6;
    println!(
        "{}",
        serde_json::to_string_pretty(&json!({
            "input": input.display().to_string(),
            "records": records,
            "input_mb": mb,
            "parquet_mb": parquet_bytes as f64 / 1e6,
            "runs": runs,
            "one_core_s": {
                "split_lines": split_s,
                "decode_floe": floe_s,
                "decode_arrow_json": arrow_json_s,
                "encode_parquet_zstd1": encode_s,
            },
            "one_core_mb_per_s": {
                "decode_floe": mb / floe_s,
                "decode_arrow_json": mb / arrow_json_s,
                "encode_parquet_zstd1": mb / encode_s,
            },
            "cores": cores,
            "floor_s": {
                "one_core": per_core,
                "all_cores": per_core / cores as f64,
                "all_cores_arrow_json": (split_s + arrow_json_s + encode_s) / cores as f64,
            },
        }))?
    );
    Ok(())
}
