//! The report as terminal text (with a histogram) and as one self-contained HTML page with
//! inline SVG plots (no scripts, no external resources).

use std::fmt::Write;

use super::observe::bytes;
use super::Report;

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
        "  {:<32} {:>7} {:>10} {:>10} {:>7} {:>7} {:>6}",
        "partition", "files", "avg", "median", "<min", "deletes", "active"
    );
    for p in r.partitions.iter().take(TEXT_PARTITIONS) {
        let _ = writeln!(
            s,
            "  {:<32} {:>7} {:>10} {:>10} {:>7} {:>7} {:>6}",
            p.partition,
            p.data_files,
            bytes(p.avg_bytes),
            bytes(p.median_bytes),
            p.files_under_min,
            p.delete_files,
            if p.active { "yes" } else { "no" }
        );
    }
    let h = &r.history;
    let _ = writeln!(
        s,
        "\nhistory: {} snapshots{}; {} commits/h; {:.1} files ({}) per writing commit",
        h.snapshots,
        match (h.oldest_ms, h.newest_ms) {
            (Some(a), Some(b)) => format!(" from {} to {}", when(a), when(b)),
            _ => String::new(),
        },
        if h.commits_per_hour > 0.0 {
            format!("{:.1}", h.commits_per_hour)
        } else {
            "-".to_string()
        },
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

/// A horizontal bar chart as inline SVG.
fn svg_bars(title: &str, rows: &[(String, u64, String)], color: &str) -> String {
    let row_h = 18;
    let label_w = 260;
    let bar_w = 480;
    let h = rows.len() * row_h + 30;
    let max = rows.iter().map(|r| r.1).max().unwrap_or(0).max(1);
    let mut s = format!(
        "<h3>{}</h3><svg xmlns='http://www.w3.org/2000/svg' width='{}' height='{h}' role='img'>",
        esc(title),
        label_w + bar_w + 120
    );
    for (i, (label, v, shown)) in rows.iter().enumerate() {
        let y = 10 + i * row_h;
        let w = (*v as f64 / max as f64 * bar_w as f64).round() as usize;
        let _ = write!(
            s,
            "<text x='{}' y='{}' text-anchor='end' font-size='12'>{}</text><rect x='{}' y='{}' width='{w}' height='{}' fill='{color}'><title>{}: {}</title></rect><text x='{}' y='{}' font-size='12'>{}</text>",
            label_w - 6,
            y + 12,
            esc(label),
            label_w,
            y + 2,
            row_h - 4,
            esc(label),
            esc(shown),
            label_w + w + 6,
            y + 12,
            esc(shown)
        );
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
        "<h2>History</h2><p>{} snapshots, {:.1} commits/h, {:.1} files per writing commit. Only old snapshots hold {} files ({}); \
         expirable now: {} snapshots, {} files ({}). {} manifests ({}); {} metadata.json files ({}), {} in the log.</p>",
        h.snapshots,
        h.commits_per_hour,
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
    s.push_str("</body></html>\n");
    s
}
