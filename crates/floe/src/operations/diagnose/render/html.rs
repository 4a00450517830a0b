//! The report, with a before/after section when compared, as one self-contained HTML page.

use std::fmt::Write;

use super::svg::{esc, svg_bars, svg_bars_paired, svg_columns};
use super::{change, commit_rate, retainer_text, scan_text, shown, when, writer_text};
use crate::operations::diagnose::compare::Comparison;
use crate::operations::diagnose::model::{bytes, Report};

/// Partitions plotted in HTML.
const HTML_PARTITIONS: usize = 50;

/// The report as one self-contained HTML page.
pub fn html(r: &Report) -> String {
    html_with(r, None)
}

/// The comparison's section of the HTML page: a before/after table and the file-size
/// histogram with both bars.
fn compare_html(c: &Comparison) -> String {
    let mut s = format!(
        "<h2>Before / after</h2><p>before: saved report of {} ({}); after: now ({}).</p>",
        esc(&c.before_table),
        esc(&when(c.before.generated_at_ms)),
        esc(&when(c.after.generated_at_ms))
    );
    for w in &c.warnings {
        let _ = write!(s, "<p><b>warning:</b> {}</p>", esc(w));
    }
    s.push_str("<table><tr><th>metric</th><th>before</th><th>after</th><th>change</th></tr>");
    for d in &c.deltas {
        let _ = write!(
            s,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&d.metric),
            esc(&shown(d.before, d.unit)),
            esc(&shown(d.after, d.unit)),
            esc(&change(d))
        );
    }
    s.push_str("</table>");
    let rows: Vec<(String, u64, String)> = c
        .after
        .size_buckets
        .iter()
        .map(|b| {
            (
                b.label.clone(),
                b.files,
                format!("after: {} files", b.files),
            )
        })
        .collect();
    let before: Vec<(u64, String)> = c
        .after
        .size_buckets
        .iter()
        .map(|a| {
            let n = c
                .before
                .size_buckets
                .iter()
                .find(|b| b.label == a.label)
                .map_or(0, |b| b.files);
            (n, format!("before: {n} files"))
        })
        .collect();
    s.push_str(&svg_bars_paired(
        "File-size histogram, before (grey) and after",
        &rows,
        Some(&before),
        "#4c78a8",
    ));
    s
}

/// The report as one self-contained HTML page, with a before/after section when `cmp` is given.
pub fn html_with(r: &Report, cmp: Option<&Comparison>) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        "<!doctype html><html><head><meta charset='utf-8'><title>floe diagnose {}</title><style>\
         body{{font-family:system-ui,sans-serif;margin:2em;max-width:1000px;color:#222}}\
         table{{border-collapse:collapse;font-size:13px}}td,th{{border:1px solid #ccc;padding:3px 8px;text-align:right}}\
         td:first-child,th:first-child{{text-align:left}}.holds{{background:#fff3e0}}code{{background:#f4f4f4;padding:1px 4px}}\
         </style></head><body><h1>floe diagnose: {}</h1><p>{} &middot; generated {} in {} ms</p>",
        esc(&r.table),
        esc(&r.table),
        esc(&r.location),
        esc(&when(r.generated_at_ms)),
        r.duration_ms
    );
    let t = &r.totals;
    let _ = write!(
        s,
        "<p><b>{}</b> live data files ({}, {} rows) in <b>{}</b> partitions ({} active); {} delete files. \
         Target file size {}; <b>{}</b> files under {} (small); median file {}.</p>",
        t.data_files,
        bytes(t.data_bytes),
        t.records,
        t.partitions,
        t.active_partitions,
        t.delete_files,
        bytes(r.thresholds.target_file_size_bytes),
        t.files_under_min,
        bytes(r.thresholds.min_file_size_bytes),
        bytes(t.median_bytes)
    );
    if let Some(c) = cmp {
        s.push_str(&compare_html(c));
    }
    s.push_str("<h2>Observations</h2><table><tr><th>observation</th><th>holds</th><th>evidence</th><th>first action</th></tr>");
    for o in &r.observations {
        let _ = write!(
            s,
            "<tr class='{}'><td>{}</td><td>{}</td><td style='text-align:left'>{}</td><td style='text-align:left'>{}</td></tr>",
            if o.holds { "holds" } else { "" },
            esc(o.observation),
            if o.holds { "yes" } else { "no" },
            esc(&o.evidence),
            o.action.as_deref().map(|a| format!("<code>{}</code>", esc(a))).unwrap_or_default()
        );
    }
    s.push_str("</table>");
    if let Some(o) = &r.over_partitioned {
        let _ = write!(
            s,
            "<h2>Partitioning</h2><p>spec <code>{}</code>: {} per partition per {} (median over {} partitions, {}); target file size {}.</p><p class='{}'>{}</p>",
            esc(&o.spec),
            bytes(o.bytes_per_partition_median),
            esc(&o.window),
            o.partitions,
            o.basis,
            bytes(o.target),
            if o.holds { "holds" } else { "" },
            esc(&o.evidence)
        );
        if !o.alternatives.is_empty() {
            s.push_str("<table><tr><th>spec</th><th>partitions merged</th><th>bytes per partition</th></tr>");
            for a in &o.alternatives {
                let _ = write!(
                    s,
                    "<tr><td><code>{}</code></td><td>{:.1}</td><td>{}</td></tr>",
                    esc(if a.spec.is_empty() {
                        "(unpartitioned)"
                    } else {
                        &a.spec
                    }),
                    a.factor,
                    bytes(a.bytes_per_partition)
                );
            }
            s.push_str("</table>");
        }
        for c in &o.commands {
            let _ = write!(s, "<p><code>{}</code></p>", esc(c));
        }
    }
    let hist: Vec<(String, u64, String)> = r
        .size_histogram
        .iter()
        .map(|b| {
            (
                b.label.to_string(),
                b.files,
                format!("{} files, {}", b.files, bytes(b.bytes)),
            )
        })
        .collect();
    s.push_str(&svg_bars(
        "File-size histogram (live data files)",
        &hist,
        "#4c78a8",
    ));
    let parts: Vec<(String, u64, String)> = r
        .partitions
        .iter()
        .take(HTML_PARTITIONS)
        .map(|p| {
            (
                p.partition.clone(),
                p.data_files,
                format!(
                    "{} files, {} small, avg {}",
                    p.data_files,
                    p.files_under_min,
                    bytes(p.avg_bytes)
                ),
            )
        })
        .collect();
    s.push_str(&svg_bars(
        &format!(
            "Files per partition (top {} of {})",
            parts.len(),
            r.partitions.len()
        ),
        &parts,
        "#f58518",
    ));
    let points: Vec<(i64, u64, String)> = r
        .history
        .recent
        .iter()
        .map(|c| (c.timestamp_ms, c.added_data_files, c.operation.clone()))
        .collect();
    s.push_str(&svg_columns(
        "Data files added per commit over time",
        &points,
        "#54a24b",
    ));
    let h = &r.history;
    let _ = write!(
        s,
        "<h2>History</h2><p>{} snapshots, {}, {:.1} files per writing commit. Only old snapshots hold {} files ({}); \
         expirable now: {} snapshots, {} files ({}). {} manifests ({}); {} metadata.json files ({}), {} in the log.</p>",
        h.snapshots,
        esc(&commit_rate(h)),
        h.avg_files_per_commit,
        h.only_old_files,
        bytes(h.only_old_bytes),
        h.expirable_snapshots,
        h.expirable_files,
        bytes(h.expirable_bytes),
        h.manifests,
        bytes(h.manifest_bytes),
        h.metadata_json_files,
        bytes(h.metadata_json_bytes),
        h.metadata_log_entries
    );
    let _ = write!(
        s,
        "<p>Scan cost: {}.</p>",
        esc(&scan_text(&r.scan_requests))
    );
    if let Some(w) = &h.writer {
        let _ = write!(s, "<p>Writer: {}.</p>", esc(&writer_text(w)));
    }
    if !h.retained_by.is_empty() {
        s.push_str("<ul>");
        for k in &h.retained_by {
            let _ = write!(s, "<li>Kept by {}</li>", esc(&retainer_text(k)));
        }
        s.push_str("</ul>");
    }
    let st = &r.storage;
    let _ = write!(
        s,
        "<h2>Storage</h2><p>{} files ({}) under the location; {} unreferenced ({}).</p><table><tr><th>age</th><th>files</th><th>bytes</th></tr>",
        st.listed_files,
        bytes(st.listed_bytes),
        st.unreferenced_files,
        bytes(st.unreferenced_bytes)
    );
    for (l, n, b) in &st.unreferenced_by_age {
        let _ = write!(
            s,
            "<tr><td>{}</td><td>{n}</td><td>{}</td></tr>",
            esc(l),
            bytes(*b)
        );
    }
    s.push_str("</table><h2>Writers</h2>");
    if r.writers.is_empty() {
        s.push_str("<p>No writer watermark in any snapshot summary.</p>");
    } else {
        s.push_str(
            "<table><tr><th>writer</th><th>snapshot</th><th>committed</th><th>position</th></tr>",
        );
        for w in &r.writers {
            let pos = w
                .position
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(" ");
            let _ = write!(
                s,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td style='text-align:left'>{}</td></tr>",
                esc(&w.writer()),
                w.snapshot_id,
                esc(&when(w.timestamp_ms)),
                esc(&pos)
            );
        }
        s.push_str("</table>");
    }
    if let Some(p) = &r.probe {
        let _ = write!(
            s,
            "<h2>Probe</h2><p>{}: {} rows in {} batches, {} ms.</p>",
            esc(&p.query),
            p.rows,
            p.batches,
            p.elapsed_ms
        );
    }
    s.push_str("</body></html>\n");
    s
}
