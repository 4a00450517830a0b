//! Human and `--json` output. Human output goes to stdout, progress to stderr (hidden when not a
//! terminal or with `--json`), errors to stderr as one line; with `--json` errors are also
//! printed on stdout as `{"error": ...}`.

use std::io::{IsTerminal, Write};
use std::time::Duration;

use anyhow::Result;
use arrow::record_batch::RecordBatch;
use floe::base::cost::{Phase, Progress};
use floe::iceberg::table::Table;
pub use floe::table::ident::{printable, printable_lines};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{json, Value};

pub struct Out {
    json: bool,
}

/// An error whose `--json` form carries details besides the message (`{"error": ..., ...}`).
#[derive(Debug)]
pub struct Failure {
    pub message: String,
    /// A JSON object merged into the error object.
    pub details: Value,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failure {}

impl Out {
    pub fn new(json: bool) -> Self {
        Self { json }
    }

    pub fn is_json(&self) -> bool {
        self.json
    }

    /// Prints a result: `value` as JSON, or `text()` for humans.
    pub fn result(&self, value: &Value, text: impl FnOnce() -> String) {
        if self.json {
            crate::output::line(format_args!("{value}"));
        } else {
            // Names made by other tools may hold escapes and bidirectional overrides.
            let t = text();
            if !t.is_empty() {
                crate::output::line(format_args!("{}", printable_lines(&t)));
            }
        }
    }

    /// Prints a line for humans only.
    pub fn say(&self, text: impl AsRef<str>) {
        if !self.json {
            crate::output::line(format_args!("{}", printable_lines(text.as_ref())));
        }
    }

    /// A note on stderr for humans (what a long-running command is doing); none with `--json`.
    pub fn note(&self, text: impl AsRef<str>) {
        if !self.json {
            eprintln!("{}", printable_lines(text.as_ref()));
        }
    }

    /// A warning on stderr (with `--json` too: the result on stdout stays one JSON value).
    pub fn warn(&self, text: impl AsRef<str>) {
        eprintln!("warning: {}", printable_lines(text.as_ref()));
    }

    pub fn error(&self, e: &anyhow::Error) {
        // Context added by the CLI, then floe's own error, whose one line is complete: the
        // library's sources (iceberg, opendal, HTTP) repeat it at length.
        let mut parts: Vec<String> = vec![];
        for c in e.chain() {
            let text = c.to_string();
            if !parts.iter().any(|p| p.contains(&text)) {
                parts.push(text);
            }
            if c.is::<floe::Error>() {
                break;
            }
        }
        // Catalog clients (sqlx, reqwest, opendal) may echo a URI or a credential.
        let msg = floe::base::secrets::mask(&parts.join(": "));
        if self.json {
            let mut v = json!({ "error": msg });
            if let (Some(f), Some(obj)) = (e.downcast_ref::<Failure>(), v.as_object_mut()) {
                if let Some(details) = f.details.as_object() {
                    for (k, d) in details {
                        obj.insert(k.clone(), d.clone());
                    }
                }
            }
            crate::output::line(format_args!("{v}"));
        }
        eprintln!("error: {}", printable_lines(&msg));
    }

    /// A spinner on stderr for long steps (hidden for scripts).
    pub fn spinner(&self, msg: String) -> ProgressBar {
        if self.json || !std::io::stderr().is_terminal() {
            return ProgressBar::hidden();
        }
        let pb = ProgressBar::new_spinner();
        pb.set_style(
            ProgressStyle::with_template("{spinner} {msg} [{elapsed}]").expect("valid template"),
        );
        pb.set_message(msg);
        pb.enable_steady_tick(Duration::from_millis(120));
        pb
    }

    /// A progress bar on stderr (hidden for scripts) and the callback that drives it from an
    /// operation's [`Progress`] events (for `with_progress`): bytes for the write phase (with
    /// `unit`, what a step is, e.g. "groups"), files for deletes.
    pub fn progress(
        &self,
        unit: &'static str,
    ) -> (ProgressBar, impl Fn(&Progress) + Send + Sync + 'static) {
        let bar = if self.json || !std::io::stderr().is_terminal() {
            ProgressBar::hidden()
        } else {
            let pb = ProgressBar::new(0);
            pb.enable_steady_tick(Duration::from_millis(200));
            pb
        };
        let pb = bar.clone();
        (bar, move |p: &Progress| {
            if p.done.steps == 0 {
                let template = match p.phase {
                    Phase::Write => {
                        "{bar:30} {bytes}/{total_bytes} {bytes_per_sec} {msg} [{elapsed}]"
                    }
                    Phase::Delete => "{bar:30} {pos}/{len} files {msg} [{elapsed}]",
                    Phase::Commit => "{spinner} {msg} [{elapsed}]",
                };
                pb.set_style(ProgressStyle::with_template(template).expect("valid template"));
            }
            match p.phase {
                Phase::Write => {
                    pb.set_length(p.total.bytes);
                    pb.set_position(p.done.bytes);
                    pb.set_message(format!(
                        "{}/{} {unit}, {}/{} files",
                        p.done.steps, p.total.steps, p.done.files, p.total.files
                    ));
                }
                Phase::Delete => {
                    pb.set_length(p.total.files);
                    pb.set_position(p.done.files);
                    pb.set_message("deleted");
                }
                Phase::Commit => pb.set_message(format!(
                    "{} {unit}, {} rows, {} files",
                    p.done.steps, p.done.rows, p.done.files
                )),
            }
        })
    }

    /// Prints query results as a table, `--json` (one object per line) or CSV. A reader that
    /// went away (`floe sql ... | head`) ends the output quietly, as it ends any Unix filter.
    pub fn batches(&self, batches: &[RecordBatch], csv: bool) -> Result<()> {
        match self.write_batches(batches, csv) {
            Err(e) if broken_pipe(&e) => Ok(()),
            done => done,
        }
    }

    fn write_batches(&self, batches: &[RecordBatch], csv: bool) -> Result<()> {
        let stdout = std::io::stdout();
        let mut lock = stdout.lock();
        if self.json {
            let mut w = arrow::json::WriterBuilder::new()
                .with_encoder_factory(std::sync::Arc::new(NonFiniteAsStrings))
                .build::<_, arrow::json::writer::LineDelimited>(&mut lock);
            for b in batches {
                w.write(b)?;
            }
            w.finish()?;
        } else if csv {
            let mut w = arrow::csv::WriterBuilder::new()
                .with_header(true)
                .build(&mut lock);
            for b in batches {
                w.write(b)?;
            }
        } else {
            writeln!(
                lock,
                "{}",
                arrow::util::pretty::pretty_format_batches(batches)?
            )?;
        }
        Ok(())
    }
}

pub fn describe_json(t: &Table) -> Value {
    let md = t.metadata();
    let schema: Vec<Value> = md
        .current_schema()
        .as_struct()
        .fields()
        .iter()
        .map(|f| {
            // A column of a type floe carries but does not parse shows its own type.
            let ty = floe::table::opaque::original_type(f.doc.as_deref())
                .unwrap_or_else(|| f.field_type.to_string());
            json!({"id": f.id, "name": f.name, "type": ty, "required": f.required})
        })
        .collect();
    let spec = md.default_partition_spec();
    let partition: Vec<Value> = spec
        .fields()
        .iter()
        .map(|f| {
            let source = md.current_schema().name_by_field_id(f.source_id).unwrap_or("?");
            json!({"name": f.name, "transform": f.transform.to_string(), "source": source, "field_id": f.field_id})
        })
        .collect();
    let current = md.current_snapshot().map(|s| {
        json!({
            "snapshot_id": s.snapshot_id(),
            "sequence_number": s.sequence_number(),
            "timestamp_ms": s.timestamp_ms(),
            "operation": s.summary().operation.as_str(),
            "summary": s.summary().additional_properties,
            "manifest_list": s.manifest_list(),
        })
    });
    json!({
        "table": floe::catalog::ident_string(t.identifier()),
        "uuid": md.uuid().to_string(),
        "format_version": floe::table::format_version(md),
        "next_row_id": (floe::table::format_version(md) >= 3).then(|| md.next_row_id()),
        "location": md.location(),
        "metadata_location": t.metadata_location(),
        "schema_id": md.current_schema_id(),
        "schema": schema,
        "primary_key": floe::table::schema::primary_key(md.current_schema()),
        "partition_spec_id": spec.spec_id(),
        "partition_spec": partition,
        // floe's own bookkeeping (`floe.internal.*`, a v1 table's refs) is not a property.
        "properties": md
            .properties()
            .iter()
            .filter(|(k, _)| !k.starts_with(floe::base::properties::RESERVED_PREFIX))
            .collect::<std::collections::BTreeMap<_, _>>(),
        "snapshot_count": md.snapshots().len(),
        "current_snapshot": current,
        "refs": floe::operations::refs::list_refs(t).unwrap_or_default(),
    })
}

/// One line per ref: name, type, snapshot, retention settings.
pub fn refs_text(refs: &[floe::operations::refs::RefInfo]) -> String {
    let ms = |label: &str, v: Option<i64>| {
        v.map(|v| format!(" {label} {}", human_ms(v)))
            .unwrap_or_default()
    };
    refs.iter()
        .map(|r| {
            format!(
                "  {:<20} {:<6} snapshot {}{}{}{}",
                r.name,
                r.kind.as_str(),
                r.snapshot_id,
                ms("retain", r.max_ref_age_ms),
                ms("max-snapshot-age", r.max_snapshot_age_ms),
                r.min_snapshots_to_keep
                    .map(|n| format!(" min-snapshots-to-keep {n}"))
                    .unwrap_or_default()
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A duration in milliseconds as the largest whole unit (7d, 12h, 90s, 250ms).
fn human_ms(ms: i64) -> String {
    for (unit, size) in [
        ("w", 604_800_000),
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1_000),
    ] {
        if ms >= size && ms % size == 0 {
            return format!("{}{unit}", ms / size);
        }
    }
    format!("{ms}ms")
}

pub fn describe_text(t: &Table) -> String {
    let v = describe_json(t);
    let mut s = String::new();
    s.push_str(&format!(
        "table      {}\n",
        v["table"].as_str().unwrap_or("")
    ));
    s.push_str(&format!("format     v{}\n", v["format_version"]));
    s.push_str(&format!(
        "location   {}\n",
        v["location"].as_str().unwrap_or("")
    ));
    s.push_str(&format!(
        "metadata   {}\n",
        v["metadata_location"].as_str().unwrap_or("")
    ));
    s.push_str("schema\n");
    for f in v["schema"].as_array().into_iter().flatten() {
        s.push_str(&format!(
            "  {:>3}  {:<24} {}{}\n",
            f["id"],
            f["name"].as_str().unwrap_or(""),
            f["type"].as_str().unwrap_or(""),
            if f["required"].as_bool() == Some(true) {
                " not null"
            } else {
                ""
            }
        ));
    }
    let key: Vec<&str> = v["primary_key"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    if !key.is_empty() {
        s.push_str(&format!("primary key {}\n", key.join(", ")));
    }
    let parts: Vec<String> = v["partition_spec"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            format!(
                "{}({}) as {}",
                p["transform"].as_str().unwrap_or(""),
                p["source"].as_str().unwrap_or(""),
                p["name"].as_str().unwrap_or("")
            )
        })
        .collect();
    s.push_str(&format!(
        "partition  {}\n",
        if parts.is_empty() {
            "unpartitioned".into()
        } else {
            parts.join(", ")
        }
    ));
    s.push_str("properties\n");
    if let Some(props) = v["properties"].as_object() {
        let mut keys: Vec<_> = props.keys().collect();
        keys.sort();
        for k in keys {
            s.push_str(&format!("  {k} = {}\n", props[k].as_str().unwrap_or("")));
        }
    }
    match v["current_snapshot"].as_object() {
        None => s.push_str("snapshot   none (empty table)"),
        Some(c) => s.push_str(&format!(
            "snapshot   {} ({}, seq {}, {} snapshots in history), total-records {}, total-data-files {}",
            c["snapshot_id"],
            c["operation"].as_str().unwrap_or(""),
            c["sequence_number"],
            v["snapshot_count"],
            c["summary"]["total-records"].as_str().unwrap_or("?"),
            c["summary"]["total-data-files"].as_str().unwrap_or("?")
        )),
    }
    let refs: Vec<floe::operations::refs::RefInfo> =
        floe::operations::refs::list_refs(t).unwrap_or_default();
    if !refs.is_empty() {
        s.push_str("\nrefs\n");
        s.push_str(&refs_text(&refs));
    }
    s
}

pub use floe::operations::diagnose::human_bytes;

fn mib(b: u64) -> String {
    format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64)
}

pub fn compact_text(m: &floe::operations::compact::CompactMetrics) -> String {
    let mut s = String::new();
    if m.dry_run || m.plan.groups.is_empty() {
        s.push_str(&format!(
            "{}: {} live data files, {} candidates, {} groups to rewrite ({} files, {}){}\n",
            m.table,
            m.plan.live_files,
            m.plan.candidate_files,
            m.plan.groups.len(),
            m.plan.input_files(),
            mib(m.plan.input_bytes()),
            if m.dry_run {
                " [dry run: nothing committed]"
            } else {
                ""
            }
        ));
        if !m.plan.groups.is_empty() {
            s.push_str(&format!(
                "{:<40} {:>11} {:>14} {:>16}\n",
                "partition", "input files", "input bytes", "expected outputs"
            ));
            for g in &m.plan.groups {
                s.push_str(&format!(
                    "{:<40} {:>11} {:>14} {:>16}\n",
                    g.partition, g.input_files, g.input_bytes, g.expected_output_files
                ));
            }
        }
        return s.trim_end().to_string();
    }
    s.push_str(&format!(
        "compacted {}: live data files {} -> {} (rewrote {} files, {}, into {} files, {}), {} rows, {:.2} s, {:.1} MB/s, {} commit(s)",
        m.table,
        m.live_files_before,
        m.live_files_after,
        m.rewritten_files,
        mib(m.rewritten_bytes),
        m.added_files,
        mib(m.added_bytes),
        m.rows,
        m.duration_ms as f64 / 1000.0,
        m.mb_per_s,
        m.commits.len()
    ));
    if m.removed_delete_files > 0 {
        s.push_str(&format!(
            "
removed {} position delete file(s) ({} deleted positions) whose every data file was rewritten",
            m.removed_delete_files, m.removed_position_deletes
        ));
    }
    if m.row_group_merge.files > 0 {
        s.push_str(&format!(
            "\ncopied {} row group(s), {}, of {} input file(s) without decoding (row-group-merge)",
            m.row_group_merge.row_groups,
            mib(m.row_group_merge.bytes),
            m.row_group_merge.files
        ));
    }
    if let Some(d) = &m.distributed {
        s.push_str(&format!(
            "\ndistributed run {}: {} task(s) ({} claimed again) on {} worker(s)",
            d.run_id,
            d.tasks,
            d.retried_claims,
            d.workers.len()
        ));
        for w in &d.workers {
            s.push_str(&format!(
                "\n  {}: {} task(s), {} read, {} written, {:.2} s",
                w.worker,
                w.tasks,
                mib(w.bytes_read),
                mib(w.bytes_written),
                w.seconds
            ));
        }
    }
    if m.removed_dangling_deletes > 0 {
        s.push_str(&format!(
            "
removed {} dangling delete file(s)",
            m.removed_dangling_deletes
        ));
    }
    if !m.failed_groups.is_empty() {
        s.push_str(&format!(
            "
{} group(s) failed, {} data file(s) not rewritten (failed_data_files_count)",
            m.failed_groups.len(),
            m.failed_data_files_count
        ));
    }
    for f in &m.failed_groups {
        s.push_str(&format!(
            "\ngroup {} ({} files) not committed: {}",
            f.partition, f.input_files, f.reason
        ));
    }
    s
}

/// Lines naming the files a table's delete fence kept, by reason, with a sample.
pub fn kept_lines(kept: &floe::storage::fence::KeptFiles) -> String {
    let mut s = String::new();
    for (n, what) in [
        (
            kept.outside_location,
            "outside the table location (--delete-external-files deletes them)",
        ),
        (kept.other_tables, "inside another table's location"),
        (kept.catalog_files, "of the catalog itself"),
    ] {
        if n > 0 {
            s.push_str(&format!("\n  kept {n} file(s) {what}"));
        }
    }
    for p in kept.sample.iter().take(10) {
        s.push_str(&format!("\n    {p}"));
    }
    s
}

/// `--json` floats as Spark and Trino print them: NaN and the infinities as the strings "NaN",
/// "Infinity" and "-Infinity" (arrow's writer prints them as `null`, which is not the value).
#[derive(Debug)]
struct NonFiniteAsStrings;

impl arrow::json::writer::EncoderFactory for NonFiniteAsStrings {
    fn make_default_encoder<'a>(
        &self,
        _field: &'a arrow::datatypes::FieldRef,
        array: &'a dyn arrow::array::Array,
        _options: &'a arrow::json::writer::EncoderOptions,
    ) -> std::result::Result<
        Option<arrow::json::writer::NullableEncoder<'a>>,
        arrow::error::ArrowError,
    > {
        use arrow::array::AsArray;
        use arrow::datatypes::{DataType, Float32Type, Float64Type};
        let values: Vec<f64> = match array.data_type() {
            DataType::Float64 => array.as_primitive::<Float64Type>().values().to_vec(),
            DataType::Float32 => array
                .as_primitive::<Float32Type>()
                .values()
                .iter()
                .map(|&v| f64::from(v))
                .collect(),
            _ => return Ok(None),
        };
        let f32 = matches!(array.data_type(), DataType::Float32);
        let encoder = FloatEncoder { values, f32 };
        Ok(Some(arrow::json::writer::NullableEncoder::new(
            Box::new(encoder),
            array.logical_nulls(),
        )))
    }
}

struct FloatEncoder {
    values: Vec<f64>,
    /// Print as a 32-bit float (its shortest form, not the f64 widening's digits).
    f32: bool,
}

impl arrow::json::writer::Encoder for FloatEncoder {
    fn encode(&mut self, idx: usize, out: &mut Vec<u8>) {
        let v = self.values[idx];
        let text = if v.is_nan() {
            "\"NaN\"".to_string()
        } else if v == f64::INFINITY {
            "\"Infinity\"".to_string()
        } else if v == f64::NEG_INFINITY {
            "\"-Infinity\"".to_string()
        } else if self.f32 {
            serde_json::to_string(&(v as f32)).unwrap_or_default()
        } else {
            serde_json::to_string(&v).unwrap_or_default()
        };
        out.extend_from_slice(text.as_bytes());
    }
}

/// Whether `e` is a write to a reader that went away.
fn broken_pipe(e: &anyhow::Error) -> bool {
    let pipe = |io: &std::io::Error| io.kind() == std::io::ErrorKind::BrokenPipe;
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>().is_some_and(pipe)
            || matches!(
                c.downcast_ref::<arrow::error::ArrowError>(),
                Some(arrow::error::ArrowError::IoError(_, io)) if pipe(io)
            )
    })
}

/// Writes one line to stdout. A reader that went away (`floe ... | head`) is not floe's
/// failure: the line is dropped and the command goes on and finishes its work (an ingest keeps
/// committing); `println!` would panic there.
pub fn line(text: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let _ = writeln!(std::io::stdout().lock(), "{text}");
}
