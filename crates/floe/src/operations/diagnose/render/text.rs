//! The report, and a comparison, for a terminal.

use std::fmt::Write;

use super::{change, commit_rate, retainer_text, scan_text, shown, when, writer_text};
use crate::operations::diagnose::compare::Comparison;
use crate::operations::diagnose::model::{bytes, Report};

/// Partitions listed in text output.
const TEXT_PARTITIONS: usize = 10;

fn bar(value: u64, max: u64, width: usize) -> String {
    if max == 0 || value == 0 {
        return String::new();
    }
    let n = ((value as f64 / max as f64) * width as f64).ceil() as usize;
    "█".repeat(n.clamp(1, width))
}

/// The over-partitioning finding's lines for a terminal (empty when there is none).
fn over_partitioned_text(r: &Report) -> String {
    let Some(o) = &r.over_partitioned else {
        return String::new();
    };
    let mut s = if o.partitions == 0 {
        format!("\npartitioning: {}", o.spec)
    } else {
        format!(
            "\npartitioning: {}: {} per partition per {} (median over {}, {}), target {}",
            o.spec,
            bytes(o.bytes_per_partition_median),
            o.window,
            o.partitions,
            o.basis,
            bytes(o.target)
        )
    };
    if o.holds {
        s.push_str(&format!("\n  OVER-PARTITIONED: {}", o.evidence));
        for c in &o.commands {
            s.push_str(&format!("\n  run: {c}"));
        }
    } else {
        s.push_str(&format!("\n  {}", o.evidence));
    }
    s.push('\n');
    s
}

/// What the delete files are: `: 12 deletion vectors (3,400 rows), 2 position delete files`.
fn delete_kinds(t: &crate::operations::diagnose::model::Totals) -> String {
    let mut kinds = Vec::new();
    if t.deletion_vectors > 0 {
        kinds.push(format!(
            "{} deletion vectors ({} rows deleted)",
            t.deletion_vectors, t.vector_deleted_rows
        ));
    }
    if t.position_delete_files > 0 {
        kinds.push(format!("{} position delete files", t.position_delete_files));
    }
    if t.equality_delete_files > 0 {
        kinds.push(format!("{} equality delete files", t.equality_delete_files));
    }
    match kinds.is_empty() {
        true => String::new(),
        false => format!(": {}", kinds.join(", ")),
    }
}

/// The report for a terminal.
pub fn text(r: &Report) -> String {
    let mut s = String::new();
    let t = &r.totals;
    let _ = writeln!(
        s,
        "table {}  ({}, format v{})",
        r.table, r.location, r.format_version
    );
    let _ = writeln!(
        s,
        "live: {} data files, {}, {} rows in {} partition(s) ({} active); {} delete files ({}){}",
        t.data_files,
        bytes(t.data_bytes),
        t.records,
        t.partitions,
        t.active_partitions,
        t.delete_files,
        bytes(t.delete_bytes),
        delete_kinds(t)
    );
    let _ = writeln!(
        s,
        "target file size {}; small = under {}: {} files ({:.0}%); median file {}",
        bytes(r.thresholds.target_file_size_bytes),
        bytes(r.thresholds.min_file_size_bytes),
        t.files_under_min,
        if t.data_files > 0 {
            100.0 * t.files_under_min as f64 / t.data_files as f64
        } else {
            0.0
        },
        bytes(t.median_bytes)
    );
    let _ = writeln!(s, "\nfile sizes (live data files)");
    let max = r.size_histogram.iter().map(|b| b.files).max().unwrap_or(0);
    for b in &r.size_histogram {
        let _ = writeln!(
            s,
            "  {:>14} {:>8}  {}",
            b.label,
            b.files,
            bar(b.files, max, 40)
        );
    }
    let _ = writeln!(
        s,
        "\npartitions (most files first, {} of {})",
        r.partitions.len().min(TEXT_PARTITIONS),
        r.partitions.len()
    );
    let _ = writeln!(
        s,
        "  {:<32} {:>7} {:>10} {:>10} {:>7} {:>7} {:>8} {:>6}",
        "partition", "files", "avg", "median", "<min", "deletes", "deleted", "active"
    );
    for p in r.partitions.iter().take(TEXT_PARTITIONS) {
        let _ = writeln!(
            s,
            "  {:<32} {:>7} {:>10} {:>10} {:>7} {:>7} {:>7.1}% {:>6}",
            p.partition,
            p.data_files,
            bytes(p.avg_bytes),
            bytes(p.median_bytes),
            p.files_under_min,
            p.delete_files,
            p.deleted_row_ratio * 100.0,
            if p.active { "yes" } else { "no" }
        );
    }
    let h = &r.history;
    let _ = writeln!(
        s,
        "\nhistory: {} snapshots{}; {}; {:.1} files ({}) per writing commit",
        h.snapshots,
        match (h.oldest_ms, h.newest_ms) {
            (Some(a), Some(b)) => format!(" from {} to {}", when(a), when(b)),
            _ => String::new(),
        },
        commit_rate(h),
        h.avg_files_per_commit,
        bytes(h.avg_bytes_per_commit as u64)
    );
    let _ = writeln!(
        s,
        "  only old snapshots hold {} files ({}); expirable now: {} snapshots, {} files ({})",
        h.only_old_files,
        bytes(h.only_old_bytes),
        h.expirable_snapshots,
        h.expirable_files,
        bytes(h.expirable_bytes)
    );
    let _ = writeln!(
        s,
        "  manifests: {} ({}); metadata.json: {} files ({}), {} in the log; refs: {}",
        h.manifests,
        bytes(h.manifest_bytes),
        h.metadata_json_files,
        bytes(h.metadata_json_bytes),
        h.metadata_log_entries,
        if h.refs.is_empty() {
            "none".into()
        } else {
            h.refs.join(", ")
        }
    );
    if let Some(w) = &h.writer {
        let _ = writeln!(s, "  writer: {}", writer_text(w));
    }
    for r in &h.retained_by {
        let _ = writeln!(s, "  kept by {}", retainer_text(r));
    }
    let _ = writeln!(s, "  scan cost: {}", scan_text(&r.scan_requests));
    let recent: Vec<_> = h.recent.iter().rev().take(20).collect();
    if !recent.is_empty() {
        let max = recent.iter().map(|c| c.added_data_files).max().unwrap_or(0);
        let _ = writeln!(s, "  data files added per commit (newest first):");
        for c in recent {
            let _ = writeln!(
                s,
                "    {} {:<9} {:>6}  {}",
                when(c.timestamp_ms),
                c.operation,
                c.added_data_files,
                bar(c.added_data_files, max, 30)
            );
        }
    }
    let st = &r.storage;
    match &st.skipped {
        Some(why) => {
            let _ = writeln!(s, "\nstorage: not listed ({why})");
        }
        None => {
            let _ = writeln!(
                s,
                "\nstorage: {} files ({}) under the location; {} unreferenced ({}): {}",
                st.listed_files,
                bytes(st.listed_bytes),
                st.unreferenced_files,
                bytes(st.unreferenced_bytes),
                st.unreferenced_by_age
                    .iter()
                    .map(|(l, n, _)| format!("{l}: {n}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }
    if r.writers.is_empty() {
        let _ = writeln!(s, "\nwriters: no watermark in any snapshot summary");
    } else {
        let _ = writeln!(s, "\nwriters (newest snapshot with each watermark):");
        for w in &r.writers {
            let pos = w
                .position
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(" ");
            let _ = writeln!(
                s,
                "  {:<40} snapshot {} at {}  {pos}",
                w.writer(),
                w.snapshot_id,
                when(w.timestamp_ms)
            );
        }
    }
    s.push_str(&over_partitioned_text(r));
    if let Some(p) = &r.probe {
        let _ = writeln!(
            s,
            "\nprobe: {} read {} rows in {} batches in {} ms",
            p.query, p.rows, p.batches, p.elapsed_ms
        );
    }
    let _ = writeln!(s, "\nobservations");
    for o in &r.observations {
        let _ = writeln!(
            s,
            "  [{}] {}",
            if o.holds { "x" } else { " " },
            o.observation
        );
        if o.holds {
            let _ = writeln!(s, "      evidence: {}", o.evidence);
            let _ = writeln!(s, "      investigate: {}", o.investigate);
            if let Some(a) = &o.action {
                let _ = writeln!(s, "      first action: {a}");
            }
        }
    }
    if !r.observations.iter().any(|o| o.holds) {
        let _ = writeln!(s, "  nothing to fix: no observation holds");
    }
    s
}

/// A comparison (`diagnose --compare`) for a terminal: before, after and the change.
pub fn compare_text(c: &Comparison) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "before / after: {} (saved {}) vs now ({})",
        c.before_table,
        when(c.before.generated_at_ms),
        when(c.after.generated_at_ms)
    );
    let _ = writeln!(
        s,
        "  {:<34} {:>14} {:>14}  change",
        "metric", "before", "after"
    );
    for d in &c.deltas {
        let _ = writeln!(
            s,
            "  {:<34} {:>14} {:>14}  {}",
            d.metric,
            shown(d.before, d.unit),
            shown(d.after, d.unit),
            change(d)
        );
    }
    for w in &c.warnings {
        let _ = writeln!(s, "  warning: {w}");
    }
    s
}
