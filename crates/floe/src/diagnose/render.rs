//! The report as terminal text (with a histogram) and as one self-contained HTML page with
//! inline SVG plots (no scripts, no external resources).

use std::fmt::Write;

use super::compare::{Comparison, Delta};
use super::observe::bytes;
use super::{History, Report};

/// Partitions listed in text output.
const TEXT_PARTITIONS: usize = 10;
/// Partitions plotted in HTML.
const HTML_PARTITIONS: usize = 50;

fn when(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string())
        .unwrap_or_else(|| ms.to_string())
}

fn bar(value: u64, max: u64, width: usize) -> String {
    if max == 0 || value == 0 {
        return String::new();
    }
    let n = ((value as f64 / max as f64) * width as f64).ceil() as usize;
    "█".repeat(n.clamp(1, width))
}

/// A duration for people: `850 ms`, `10 s`, `12 min`, `5.5 h`, `3.2 d`.
pub fn duration(ms: i64) -> String {
    let ms = ms.max(0);
    match ms {
        0..=999 => format!("{ms} ms"),
        1_000..=9_999 => format!("{:.1} s", ms as f64 / 1000.0),
        10_000..=119_999 => format!("{} s", (ms as f64 / 1000.0).round()),
        120_000..=7_199_999 => format!("{} min", (ms as f64 / 60_000.0).round()),
        7_200_000..=172_799_999 => format!("{:.1} h", ms as f64 / 3_600_000.0),
        _ => format!("{:.1} d", ms as f64 / 86_400_000.0),
    }
}

/// `n` with thousands separators (`14,400`).
fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The commit rate over the recent commits, with the span it is measured over, so a burst
/// within seconds reads as what it is: `40 commits in 10 s (14,040/h)`.
pub fn commit_rate(h: &History) -> String {
    let n = h.recent.len() as u64;
    let last = if n < h.snapshots {
        format!("last {n} commits")
    } else {
        format!("{n} commits")
    };
    match n {
        0 => "no commits".to_string(),
        1 => "1 commit".to_string(),
        _ if h.recent_span_ms <= 0 => format!("{last} within 1 ms"),
        _ => {
            let rate = h.commits_per_hour;
            let shown = if rate >= 100.0 {
                grouped(rate.round() as u64)
            } else {
                format!("{rate:.1}")
            };
            format!("{last} in {} ({shown}/h)", duration(h.recent_span_ms))
        }
    }
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

/// The report for a terminal.
pub fn text(r: &Report) -> String {
    let mut s = String::new();
    let t = &r.totals;
    let _ = writeln!(s, "table {}  ({})", r.table, r.location);
    let _ = writeln!(
        s,
        "live: {} data files, {}, {} rows in {} partition(s) ({} active); {} delete files ({})",
        t.data_files,
        bytes(t.data_bytes),
        t.records,
        t.partitions,
        t.active_partitions,
        t.delete_files,
        bytes(t.delete_bytes)
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

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Estimated width in pixels of `text` at `font_px` (a proportional sans-serif font averages
/// about 0.6 em per character; digits and capitals run wider, so round up generously).
pub(crate) fn text_width(text: &str, font_px: usize) -> usize {
    (text.chars().count() * font_px * 62).div_ceil(100) + 4
}

/// A horizontal bar chart as inline SVG: the label column and the value column are as wide as
/// their longest text, so no label is cut off.
fn svg_bars(title: &str, rows: &[(String, u64, String)], color: &str) -> String {
    svg_bars_paired(title, rows, None, color)
}

/// [`svg_bars`], with a second, grey bar under each row for `before` (same row order).
fn svg_bars_paired(
    title: &str,
    rows: &[(String, u64, String)],
    before: Option<&[(u64, String)]>,
    color: &str,
) -> String {
    const FONT: usize = 12;
    let row_h = if before.is_some() { 30 } else { 18 };
    let bar_w = 480;
    let label_w = rows
        .iter()
        .map(|r| text_width(&r.0, FONT))
        .max()
        .unwrap_or(0)
        .max(60)
        + 12;
    let shown_w = rows
        .iter()
        .map(|r| text_width(&r.2, FONT))
        .chain(
            before
                .unwrap_or_default()
                .iter()
                .map(|b| text_width(&b.1, FONT)),
        )
        .max()
        .unwrap_or(0)
        + 12;
    let width = label_w + bar_w + shown_w;
    let h = rows.len() * row_h + 30;
    let max = rows
        .iter()
        .map(|r| r.1)
        .chain(before.unwrap_or_default().iter().map(|b| b.0))
        .max()
        .unwrap_or(0)
        .max(1);
    let mut s = format!(
        "<h3>{}</h3><svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{h}' viewBox='0 0 {width} {h}' role='img'>",
        esc(title)
    );
    let scale = |v: u64| (v as f64 / max as f64 * bar_w as f64).round() as usize;
    for (i, (label, v, shown)) in rows.iter().enumerate() {
        let y = 10 + i * row_h;
        let w = scale(*v);
        let bar_h = if before.is_some() { 12 } else { row_h - 4 };
        let _ = write!(
            s,
            "<text x='{}' y='{}' text-anchor='end' font-size='{FONT}'>{}</text><rect x='{label_w}' y='{}' width='{w}' height='{bar_h}' fill='{color}'><title>{}: {}</title></rect><text x='{}' y='{}' font-size='{FONT}'>{}</text>",
            label_w - 6,
            y + 12,
            esc(label),
            y + 2,
            esc(label),
            esc(shown),
            label_w + w + 6,
            y + 12,
            esc(shown)
        );
        if let Some((bv, bshown)) = before.and_then(|b| b.get(i)) {
            let bw = scale(*bv);
            let _ = write!(
                s,
                "<rect x='{label_w}' y='{}' width='{bw}' height='10' fill='#bbb'><title>before: {}</title></rect><text x='{}' y='{}' font-size='10' fill='#666'>{}</text>",
                y + 15,
                esc(bshown),
                label_w + bw + 6,
                y + 24,
                esc(bshown)
            );
        }
    }
    s.push_str("</svg>");
    s
}

/// A column chart over time (files added per commit) as inline SVG.
fn svg_columns(title: &str, points: &[(i64, u64, String)], color: &str) -> String {
    let (w, h) = (900usize, 220usize);
    let max = points.iter().map(|p| p.1).max().unwrap_or(0).max(1);
    let n = points.len().max(1);
    let col = ((w - 60) / n).max(1);
    let mut s = format!(
        "<h3>{}</h3><svg xmlns='http://www.w3.org/2000/svg' width='{w}' height='{}' role='img'><line x1='50' y1='{h}' x2='{w}' y2='{h}' stroke='#888'/><text x='45' y='14' text-anchor='end' font-size='11'>{max}</text><text x='45' y='{h}' text-anchor='end' font-size='11'>0</text>",
        esc(title),
        h + 20
    );
    for (i, (ts, v, label)) in points.iter().enumerate() {
        let bh = (*v as f64 / max as f64 * (h - 20) as f64).round() as usize;
        let _ = write!(
            s,
            "<rect x='{}' y='{}' width='{}' height='{bh}' fill='{color}'><title>{} {}: {v}</title></rect>",
            50 + i * col,
            h - bh,
            col.saturating_sub(1).max(1),
            esc(&when(*ts)),
            esc(label)
        );
    }
    if let (Some(a), Some(b)) = (points.first(), points.last()) {
        let _ = write!(
            s,
            "<text x='50' y='{}' font-size='11'>{}</text><text x='{w}' y='{}' text-anchor='end' font-size='11'>{}</text>",
            h + 15,
            esc(&when(a.0)),
            h + 15,
            esc(&when(b.0))
        );
    }
    s.push_str("</svg>");
    s
}

/// The report as one self-contained HTML page.
pub fn html(r: &Report) -> String {
    html_with(r, None)
}

/// A compared number for people, in its unit.
fn shown(v: Option<u64>, unit: &str) -> String {
    match (v, unit) {
        (None, _) => "-".to_string(),
        (Some(v), "bytes") => bytes(v),
        (Some(v), "ms") => format!("{v} ms"),
        (Some(v), _) => v.to_string(),
    }
}

fn change(d: &Delta) -> String {
    match d.change {
        None => "-".to_string(),
        Some(0) => "=".to_string(),
        Some(c) => {
            let abs = if d.unit == "bytes" {
                bytes(c.unsigned_abs())
            } else {
                c.unsigned_abs().to_string()
            };
            let sign = if c < 0 { "-" } else { "+" };
            match d.change_pct {
                Some(p) => format!("{sign}{abs} ({p:+.0}%)"),
                None => format!("{sign}{abs}"),
            }
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `<text>` of `svg` with its x, anchor and content.
    fn texts(svg: &str) -> Vec<(usize, bool, String)> {
        let mut out = Vec::new();
        let mut rest = svg;
        while let Some(i) = rest.find("<text ") {
            let tag_end = rest[i..].find('>').unwrap() + i;
            let tag = &rest[i..tag_end];
            let close = rest[tag_end..].find("</text>").unwrap() + tag_end;
            let x_at = tag.find("x='").unwrap() + 3;
            let x: usize = tag[x_at..x_at + tag[x_at..].find('\'').unwrap()]
                .parse()
                .unwrap();
            out.push((
                x,
                tag.contains("text-anchor='end'"),
                rest[tag_end + 1..close].to_string(),
            ));
            rest = &rest[close..];
        }
        out
    }

    fn attr(svg: &str, name: &str) -> usize {
        let at = svg.find(&format!(" {name}='")).unwrap() + name.len() + 3;
        svg[at..at + svg[at..].find('\'').unwrap()].parse().unwrap()
    }

    #[test]
    fn bar_chart_labels_fit_inside_the_svg() {
        let rows = vec![
            (
                "ts_hour=2026-01-01-05/id_bucket=12/name_trunc=abcdefgh".to_string(),
                667,
                "667 files, 667 small, avg 1.2 KiB".to_string(),
            ),
            (
                "p=a".to_string(),
                3,
                "3 files, 0 small, avg 512.0 MiB".to_string(),
            ),
        ];
        let svg = svg_bars("Files per partition", &rows, "#f58518");
        let width = attr(&svg, "width");
        assert!(svg.contains(&format!("viewBox='0 0 {width} ")));
        let found = texts(&svg);
        assert_eq!(found.len(), 4);
        for (x, end, text) in &found {
            let w = text_width(text, 12);
            if *end {
                assert!(*x >= w, "label '{text}' at {x} needs {w} px to its left");
            } else {
                assert!(
                    x + w <= width,
                    "'{text}' at {x} + {w} px passes the width {width}"
                );
            }
        }
        // The full texts are there (the old layout cut them at a fixed 120 px: "667 smal").
        assert!(svg.contains(">667 files, 667 small, avg 1.2 KiB</text>"));
        assert!(svg.contains(">ts_hour=2026-01-01-05/id_bucket=12/name_trunc=abcdefgh</text>"));
        // Paired bars (before/after) leave room for the before values too.
        let before = vec![
            (9000, "before: 9000 files with a long caption".to_string()),
            (1, "before: 1 files".to_string()),
        ];
        let svg = svg_bars_paired("t", &rows, Some(&before), "#4c78a8");
        let width = attr(&svg, "width");
        for (x, end, text) in texts(&svg) {
            if !end {
                assert!(x + text_width(&text, 12) <= width, "{text}");
            }
        }
    }

    #[test]
    fn durations_read_naturally() {
        assert_eq!(duration(850), "850 ms");
        assert_eq!(duration(2_500), "2.5 s");
        assert_eq!(duration(10_000), "10 s");
        assert_eq!(duration(12 * 60_000), "12 min");
        assert_eq!(duration(5 * 3_600_000 + 1_800_000), "5.5 h");
        assert_eq!(duration(3 * 86_400_000), "3.0 d");
        assert_eq!(grouped(14_400), "14,400");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1_000_000), "1,000,000");
    }
}
