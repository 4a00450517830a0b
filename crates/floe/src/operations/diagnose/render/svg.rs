//! The inline SVG plots of the HTML page: bar charts (one bar or a before/after pair per row)
//! and a column chart over time.

use std::fmt::Write;

use super::when;

pub(super) fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Estimated width in pixels of `text` at `font_px` (a proportional sans-serif font averages
/// about 0.6 em per character; digits and capitals run wider, so round up generously).
fn text_width(text: &str, font_px: usize) -> usize {
    (text.chars().count() * font_px * 62).div_ceil(100) + 4
}

/// A horizontal bar chart as inline SVG: the label column and the value column are as wide as
/// their longest text, so no label is cut off.
pub(super) fn svg_bars(title: &str, rows: &[(String, u64, String)], color: &str) -> String {
    svg_bars_paired(title, rows, None, color)
}

/// [`svg_bars`], with a second, grey bar under each row for `before` (same row order).
pub(super) fn svg_bars_paired(
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
pub(super) fn svg_columns(title: &str, points: &[(i64, u64, String)], color: &str) -> String {
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
}
