//! The report for people: terminal text (with a histogram) and one self-contained HTML page
//! with inline SVG plots (no scripts, no external resources). Presentation only: it reads the
//! report's data (`super::model`, `super::compare`) and nothing of the computing files points
//! here.
//!
//! ```text
//!  text.rs  the report and a comparison for a terminal
//!  html.rs  the report (and a comparison) as one HTML page
//!  svg.rs   the inline plots of the page
//!  mod.rs   numbers, times and rates in words, shared by both
//! ```

mod html;
mod svg;
mod text;

use super::compare::Delta;
use super::model::{bytes, History, Retainer, ScanRequests, WriterSide};

pub use html::{html, html_with};
pub use text::{compare_text, text};

pub(super) fn when(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string())
        .unwrap_or_else(|| ms.to_string())
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
pub(super) fn grouped(n: u64) -> String {
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

/// A compared number for people, in its unit.
pub(super) fn shown(v: Option<u64>, unit: &str) -> String {
    match (v, unit) {
        (None, _) => "-".to_string(),
        (Some(v), "bytes") => bytes(v),
        (Some(v), "ms") => format!("{v} ms"),
        (Some(v), _) => v.to_string(),
    }
}

pub(super) fn change(d: &Delta) -> String {
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

/// The writer's side in words: pace, file size, commit duration, freshness.
pub(super) fn writer_text(w: &WriterSide) -> String {
    format!(
        "{} writing commits, one every {} (median), {:.1} files of {} each; commit duration {}; newest data {} old",
        w.writing_commits,
        w.commit_interval_ms
            .map_or("-".to_string(), |ms| duration(ms as i64)),
        w.files_per_commit,
        bytes(w.file_bytes),
        match w.commit_duration_ms {
            Some(ms) => format!(
                "{} (median of {}, snapshot to metadata.json on storage)",
                duration(ms as i64),
                w.commit_durations_measured
            ),
            None => "not measured (no metadata.json of a recent commit with sub-second time listed)"
                .to_string(),
        },
        w.freshness_ms.map_or("-".to_string(), |ms| duration(ms as i64)),
    )
}

/// One retainer in words.
pub(super) fn retainer_text(r: &Retainer) -> String {
    format!(
        "{}: {} snapshot(s) keep {} files ({}) beyond the current snapshot, {} ({}) kept by nothing else",
        r.retainer,
        r.snapshots,
        r.held_files,
        bytes(r.held_bytes),
        r.exclusive_files,
        bytes(r.exclusive_bytes)
    )
}

/// The full-scan request estimate in words.
pub(super) fn scan_text(q: &ScanRequests) -> String {
    format!(
        "a full scan makes {}-{} object-store requests ({} for metadata, {} row groups x {} columns); compacted to {} files: {}-{}",
        grouped(q.min),
        grouped(q.max),
        q.metadata,
        grouped(q.row_groups),
        q.columns,
        grouped(q.compacted_files),
        grouped(q.compacted_min),
        grouped(q.compacted_max)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

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
