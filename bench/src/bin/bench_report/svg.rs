//! Hand-written SVG charts (no plotting dependency): grouped horizontal bars and lines.

use std::fmt::Write as _;

const PALETTE: &[&str] = &[
    "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#b07aa1", "#edc948", "#ff9da7",
    "#9c755f", "#bab0ac",
];
const FONT: &str = "font-family=\"Helvetica,Arial,sans-serif\"";

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A "nice" upper bound (1, 1.5, 2, 2.5, 3, 4, 5, 6 or 8 times a power of ten) at or above `max`.
pub fn nice_max(max: f64) -> f64 {
    if !max.is_finite() || max <= 0.0 {
        return 1.0;
    }
    let magnitude = 10f64.powf(max.log10().floor());
    for step in [1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0] {
        if step * magnitude >= max {
            return step * magnitude;
        }
    }
    10.0 * magnitude
}

fn tick_label(v: f64) -> String {
    if v == v.round() {
        format!("{v:.0}")
    } else if (v * 10.0) == (v * 10.0).round() {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// Height of one legend row.
const LEGEND_ROW: f64 = 18.0;

/// The x of each legend entry, in rows that each fit between `x` and `max_x` (one row unless
/// the names do not fit).
fn legend_rows(names: &[&str], x: f64, max_x: f64) -> Vec<Vec<(usize, f64)>> {
    let mut rows: Vec<Vec<(usize, f64)>> = vec![Vec::new()];
    let mut cx = x;
    for (i, name) in names.iter().enumerate() {
        let w = 28.0 + 7.0 * name.chars().count() as f64;
        if cx + w > max_x && cx > x {
            rows.push(Vec::new());
            cx = x;
        }
        if let Some(row) = rows.last_mut() {
            row.push((i, cx));
        }
        cx += w;
    }
    rows
}

/// The legend from `(x, y)`, wrapped into rows before `max_x`.
fn legend(out: &mut String, names: &[&str], x: f64, y: f64, max_x: f64) {
    for (r, row) in legend_rows(names, x, max_x).iter().enumerate() {
        let ry = y + LEGEND_ROW * r as f64;
        for &(i, cx) in row {
            let color = PALETTE[i % PALETTE.len()];
            let _ = write!(
                out,
                r#"<rect x="{cx:.1}" y="{:.1}" width="12" height="12" fill="{color}"/><text x="{:.1}" y="{ry:.1}" font-size="12" {FONT}>{}</text>"#,
                ry - 10.0,
                cx + 16.0,
                escape(names[i])
            );
        }
    }
}

/// Grouped horizontal bars: one row per label, one bar per series; values printed at the bar
/// ends with `unit`. `x_max` fixes the axis (e.g. 1.0 for rates).
pub fn hbar_chart(
    title: &str,
    unit: &str,
    series: &[&str],
    rows: &[(String, Vec<f64>)],
    x_max: Option<f64>,
) -> String {
    let label_w = 12.0
        + 6.6
            * rows
                .iter()
                .map(|(l, _)| l.chars().count())
                .max()
                .unwrap_or(4) as f64;
    let plot_w = 460.0;
    let bar_h = 14.0;
    let row_h = bar_h * series.len() as f64 + 10.0;
    let top = 54.0;
    let width = label_w + plot_w + 90.0;
    let height = top + row_h * rows.len() as f64 + 36.0;
    let max = x_max.unwrap_or_else(|| {
        nice_max(
            rows.iter()
                .flat_map(|(_, v)| v.iter().copied())
                .filter(|v| v.is_finite())
                .fold(0.0, f64::max),
        )
    });
    let mut out = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}"><rect width="100%" height="100%" fill="white"/><text x="10" y="20" font-size="15" font-weight="bold" {FONT}>{}</text>"#,
        escape(title)
    );
    legend(&mut out, series, label_w, 42.0, f64::INFINITY);
    let bottom = top + row_h * rows.len() as f64;
    for i in 0..=5 {
        let v = max * f64::from(i) / 5.0;
        let x = label_w + plot_w * f64::from(i) / 5.0;
        let _ = write!(
            out,
            r##"<line x1="{x:.1}" y1="{top:.1}" x2="{x:.1}" y2="{bottom:.1}" stroke="#ddd"/><text x="{x:.1}" y="{:.1}" font-size="11" text-anchor="middle" {FONT}>{}</text>"##,
            bottom + 14.0,
            tick_label(v)
        );
    }
    let _ = write!(
        out,
        r#"<text x="{:.1}" y="{:.1}" font-size="11" text-anchor="middle" {FONT}>{}</text>"#,
        label_w + plot_w / 2.0,
        bottom + 30.0,
        escape(unit)
    );
    for (r, (label, values)) in rows.iter().enumerate() {
        let y0 = top + row_h * r as f64 + 5.0;
        let _ = write!(
            out,
            r#"<text x="{:.1}" y="{:.1}" font-size="12" text-anchor="end" {FONT}>{}</text>"#,
            label_w - 8.0,
            y0 + row_h / 2.0,
            escape(label)
        );
        for (s, value) in values.iter().enumerate() {
            let y = y0 + bar_h * s as f64;
            let v = if value.is_finite() { *value } else { 0.0 };
            let w = (plot_w * v / max).clamp(0.0, plot_w);
            let shown = if value.is_finite() {
                tick_label((v * 100.0).round() / 100.0)
            } else {
                "n/a".into()
            };
            let _ = write!(
                out,
                r#"<rect x="{label_w:.1}" y="{y:.1}" width="{w:.1}" height="{:.1}" fill="{}"/><text x="{:.1}" y="{:.1}" font-size="11" {FONT}>{shown}</text>"#,
                bar_h - 2.0,
                PALETTE[s % PALETTE.len()],
                label_w + w + 4.0,
                y + bar_h - 4.0,
            );
        }
    }
    out.push_str("</svg>\n");
    out
}

/// One line per series. `x_ticks` replaces numeric x ticks with labelled positions (e.g. a
/// categorical axis); the x bound is a nice bound of the data, the y bound `y_max` or else one.
pub struct LineChart<'a> {
    pub title: &'a str,
    pub x_label: &'a str,
    pub y_label: &'a str,
    pub series: Vec<(String, Vec<(f64, f64)>)>,
    pub x_ticks: Option<Vec<(f64, String)>>,
    /// The top of the y axis (e.g. a task's number of criteria); None: a nice bound of the data.
    pub y_max: Option<f64>,
    pub markers: bool,
}

impl LineChart<'_> {
    pub fn render(&self) -> String {
        let (left, plot_w, plot_h) = (64.0, 520.0, 280.0);
        let names: Vec<&str> = self.series.iter().map(|(n, _)| n.as_str()).collect();
        let width = left + plot_w + 30.0;
        let legend_lines = legend_rows(&names, left, width - 10.0).len().max(1);
        let top = 54.0 + LEGEND_ROW * (legend_lines - 1) as f64;
        let height = top + plot_h + 50.0;
        let points = || self.series.iter().flat_map(|(_, p)| p.iter().copied());
        let x_max = match &self.x_ticks {
            Some(ticks) => ticks.iter().map(|t| t.0).fold(0.0, f64::max),
            None => nice_max(points().map(|p| p.0).fold(0.0, f64::max)),
        };
        let y_max = self
            .y_max
            .filter(|m| m.is_finite() && *m > 0.0)
            .unwrap_or_else(|| nice_max(points().map(|p| p.1).fold(0.0, f64::max)));
        let sx = |x: f64| left + plot_w * x / x_max.max(1e-9);
        let sy = |y: f64| top + plot_h - plot_h * y / y_max;
        let mut out = format!(
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}"><rect width="100%" height="100%" fill="white"/><text x="10" y="20" font-size="15" font-weight="bold" {FONT}>{}</text>"#,
            escape(self.title)
        );
        legend(&mut out, &names, left, 42.0, width - 10.0);
        // A given small whole-number bound (a count of criteria) gets a tick per unit.
        let y_steps = match self.y_max {
            Some(m) if m.fract() == 0.0 && (1.0..=15.0).contains(&m) => m as u32,
            _ => 5,
        };
        for i in 0..=y_steps {
            let v = y_max * f64::from(i) / f64::from(y_steps);
            let y = sy(v);
            let _ = write!(
                out,
                r##"<line x1="{left:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" font-size="11" text-anchor="end" {FONT}>{}</text>"##,
                left + plot_w,
                left - 6.0,
                y + 4.0,
                tick_label(v)
            );
        }
        let ticks: Vec<(f64, String)> = match &self.x_ticks {
            Some(t) => t.clone(),
            None => (0..=5)
                .map(|i| {
                    let v = x_max * f64::from(i) / 5.0;
                    (v, tick_label(v))
                })
                .collect(),
        };
        for (v, label) in ticks {
            let x = sx(v);
            let _ = write!(
                out,
                r##"<line x1="{x:.1}" y1="{top:.1}" x2="{x:.1}" y2="{:.1}" stroke="#eee"/><text x="{x:.1}" y="{:.1}" font-size="11" text-anchor="middle" {FONT}>{}</text>"##,
                top + plot_h,
                top + plot_h + 15.0,
                escape(&label)
            );
        }
        let _ = write!(
            out,
            r##"<line x1="{left}" y1="{top}" x2="{left}" y2="{b:.1}" stroke="#333"/><line x1="{left}" y1="{b:.1}" x2="{r:.1}" y2="{b:.1}" stroke="#333"/><text x="{:.1}" y="{:.1}" font-size="12" text-anchor="middle" {FONT}>{}</text><text x="14" y="{:.1}" font-size="12" text-anchor="middle" transform="rotate(-90 14 {:.1})" {FONT}>{}</text>"##,
            left + plot_w / 2.0,
            top + plot_h + 36.0,
            escape(self.x_label),
            top + plot_h / 2.0,
            top + plot_h / 2.0,
            escape(self.y_label),
            b = top + plot_h,
            r = left + plot_w,
        );
        for (i, (_, pts)) in self.series.iter().enumerate() {
            let color = PALETTE[i % PALETTE.len()];
            let path: Vec<String> = pts
                .iter()
                .filter(|(x, y)| x.is_finite() && y.is_finite())
                .map(|(x, y)| format!("{:.1},{:.1}", sx(*x), sy(*y)))
                .collect();
            let _ = write!(
                out,
                r#"<polyline fill="none" stroke="{color}" stroke-width="2" points="{}"/>"#,
                path.join(" ")
            );
            if self.markers {
                for p in &path {
                    let (x, y) = p.split_once(',').unwrap_or(("0", "0"));
                    let _ = write!(out, r#"<circle cx="{x}" cy="{y}" r="3.5" fill="{color}"/>"#);
                }
            }
        }
        out.push_str("</svg>\n");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_legend_wraps_only_when_its_names_do_not_fit() {
        let names = ["single_shot", "continuation", "loopgate"];
        let one_row = legend_rows(&names, 64.0, f64::INFINITY);
        assert_eq!(one_row.len(), 1);
        assert_eq!(one_row[0].len(), 3);
        let rows = legend_rows(&names, 64.0, 300.0);
        let counts: Vec<usize> = rows.iter().map(Vec::len).collect();
        assert_eq!(counts, [2, 1], "{rows:?}");
        assert_eq!(rows[1][0], (2, 64.0), "a new row starts at x");
        // A name wider than the room still gets a row of its own.
        assert_eq!(legend_rows(&["a-very-long-name"], 0.0, 10.0).len(), 1);
    }

    #[test]
    fn a_given_count_bound_gets_a_tick_per_unit() {
        let chart = LineChart {
            title: "t",
            x_label: "x",
            y_label: "y",
            series: vec![("a".into(), vec![(0.0, 0.0), (1.0, 2.0)])],
            x_ticks: None,
            y_max: Some(4.0),
            markers: true,
        }
        .render();
        // The y labels are the right-aligned texts: 0, 1, 2, 3, 4.
        let y_labels: Vec<&str> = chart
            .split(r#"text-anchor="end""#)
            .skip(1)
            .filter_map(|rest| rest.split('>').nth(1)?.split('<').next())
            .collect();
        assert_eq!(y_labels, ["0", "1", "2", "3", "4"], "{chart}");
    }
}
