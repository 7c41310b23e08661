//! The charts of a report, drawn by `plotters` into SVG text: horizontal stacked bars, a
//! Gantt chart of intervals, line charts over a numeric or a categorical axis. Text is
//! written as SVG `<text>` (no font files are read); every value is checked finite and
//! every range made non-empty before it reaches plotters.

use anyhow::Result;
use plotters::coord::ranged1d::SegmentedCoord;
use plotters::coord::types::{RangedCoordf64, RangedCoordi32};
use plotters::coord::Shift;
use plotters::prelude::*;

/// Chart width in pixels (a report's column).
pub const WIDTH: u32 = 960;

/// Tableau 10: distinct colors for series, cycled.
const PALETTE: [RGBColor; 10] = [
    RGBColor(78, 121, 167),
    RGBColor(242, 142, 43),
    RGBColor(225, 87, 89),
    RGBColor(118, 183, 178),
    RGBColor(89, 161, 79),
    RGBColor(237, 201, 72),
    RGBColor(176, 122, 161),
    RGBColor(255, 157, 167),
    RGBColor(156, 117, 95),
    RGBColor(186, 176, 172),
];

/// The `i`th series color.
pub fn color(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

fn err(e: impl std::fmt::Display) -> anyhow::Error {
    anyhow::anyhow!("drawing a chart: {e}")
}

const FONT: &str = "sans-serif";

/// A finite value of a size whose ranges stay finite, or 0.
fn fin(x: f64) -> f64 {
    if x.is_finite() {
        x.clamp(-1e300, 1e300)
    } else {
        0.0
    }
}

/// `lo..hi` widened to a non-empty range, with some headroom above.
fn span(lo: f64, hi: f64) -> std::ops::Range<f64> {
    let (lo, hi) = (fin(lo), fin(hi));
    if hi > lo {
        lo..hi + (hi - lo) * 0.05
    } else {
        lo..lo + 1.0
    }
}

/// The line width of series `j`: the first ones wider, so that a later series drawn
/// over an earlier one with the same values leaves it visible around its edges.
fn width(j: usize) -> u32 {
    4u32.saturating_sub(j as u32).max(2)
}

/// The discrete range of `n` segments (plotters' `a..b` holds `b - a + 1` values; one
/// category gets two, the second empty).
fn segs(n: usize) -> std::ops::Range<i32> {
    if n >= 2 {
        0..n as i32 - 1
    } else {
        0..1
    }
}

/// Pixels of the category label area for `labels` (about 7 px a character).
fn label_area(labels: &[String]) -> u32 {
    let longest = labels.iter().map(|l| l.chars().count()).max().unwrap_or(4);
    (longest.min(48) as u32 * 7 + 16).max(60)
}

/// A named series of (x, y) points, `None` where there is no value.
pub type Series = (String, Vec<(f64, Option<f64>)>);

/// The legend entries of the series named `names`, coloured in order (`line`: drawn as
/// lines rather than boxes).
fn keys_of<'n>(names: impl Iterator<Item = &'n str>, line: bool) -> Vec<Key> {
    names
        .enumerate()
        .map(|(j, n)| Key {
            name: clip(n, 60),
            color: color(j),
            line,
        })
        .collect()
}

/// One legend entry: a name and its color, drawn as a line (else a box).
pub struct Key {
    pub name: String,
    pub color: RGBColor,
    pub line: bool,
}

/// Height of the legend strip of `keys`: rows of entries across the width.
fn legend_height(keys: &[Key]) -> u32 {
    if keys.is_empty() {
        return 0;
    }
    let mut rows = 1;
    let mut x = 0;
    for k in keys {
        let w = key_width(k);
        if x + w > WIDTH - 40 && x > 0 {
            rows += 1;
            x = 0;
        }
        x += w;
    }
    rows * 20 + 12
}

fn key_width(k: &Key) -> u32 {
    k.name.chars().count() as u32 * 7 + 40
}

/// Draws the legend below the chart, entries left to right in rows.
fn legend(area: &DrawingArea<SVGBackend, Shift>, keys: &[Key]) -> Result<()> {
    let (mut x, mut y) = (24i32, 6i32);
    for k in keys {
        let w = key_width(k) as i32;
        if x + w > WIDTH as i32 - 16 && x > 24 {
            x = 24;
            y += 20;
        }
        let c = k.color;
        if k.line {
            area.draw(&PathElement::new(
                vec![(x, y + 8), (x + 18, y + 8)],
                c.stroke_width(3),
            ))
            .map_err(err)?;
        } else {
            area.draw(&Rectangle::new(
                [(x + 2, y + 2), (x + 14, y + 14)],
                c.filled(),
            ))
            .map_err(err)?;
        }
        area.draw(&Text::new(k.name.clone(), (x + 24, y + 2), (FONT, 13)))
            .map_err(err)?;
        x += w;
    }
    Ok(())
}

/// Draws into an SVG string of `WIDTH` x (`height` + the legend's strip): the chart by
/// `draw` above, the legend of `keys` below.
fn svg(
    height: u32,
    keys: &[Key],
    draw: impl FnOnce(&DrawingArea<SVGBackend, Shift>) -> Result<()>,
) -> Result<String> {
    let mut buf = String::new();
    {
        let lh = legend_height(keys);
        let root = SVGBackend::with_string(&mut buf, (WIDTH, height + lh)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let (top, bottom) = root.split_vertically(height);
        draw(&top)?;
        legend(&bottom, keys)?;
        root.present().map_err(err)?;
    }
    Ok(buf)
}

/// A tick label: compact (`12k`, `3.5M`), without trailing zeros.
fn tick(x: &f64) -> String {
    let x = *x;
    let (v, suffix) = match x.abs() {
        a if a >= 1e12 => (x / 1e12, "T"),
        a if a >= 1e9 => (x / 1e9, "G"),
        a if a >= 1e6 => (x / 1e6, "M"),
        a if a >= 1e4 => (x / 1e3, "k"),
        _ => (x, ""),
    };
    let mut s = format!("{v:.3}");
    if s.contains('.') {
        s = s.trim_end_matches('0').trim_end_matches('.').to_string();
    }
    if s == "-0" {
        s = "0".into();
    }
    s + suffix
}

/// Shortens a label to `n` characters.
pub fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(n.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

/// The chart of horizontal bars drawn on `root`, with its caption and axes: `x` across,
/// `rows` rows down (a row `r` counted from the bottom is `SegmentValue::Exact(r)`), each
/// row labelled `row_label(row counted from the top)` in a label area `label_px` wide.
fn hbar_axes<'a, 'b>(
    root: &'a DrawingArea<SVGBackend<'b>, Shift>,
    (title, x_desc, y_desc): (&str, &str, &str),
    x: std::ops::Range<f64>,
    rows: usize,
    label_px: u32,
    row_label: impl Fn(usize) -> String,
) -> Result<HBarChart<'a, 'b>> {
    let mut chart = ChartBuilder::on(root)
        .caption(title, (FONT, 20))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(label_px)
        .build_cartesian_2d(x, segs(rows).into_segmented())
        .map_err(err)?;
    let fmt = |v: &SegmentValue<i32>| match v {
        SegmentValue::CenterOf(i) if (*i as usize) < rows => row_label(rows - 1 - *i as usize),
        _ => String::new(),
    };
    chart
        .configure_mesh()
        .disable_y_mesh()
        .x_desc(x_desc)
        .x_label_formatter(&tick)
        .y_desc(y_desc)
        .y_labels(rows)
        .y_label_formatter(&fmt)
        .axis_desc_style((FONT, 14))
        .label_style((FONT, 12))
        .draw()
        .map_err(err)?;
    Ok(chart)
}

/// What [`hbar_axes`] draws on: values across, segmented rows down.
type HBarChart<'a, 'b> =
    ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, SegmentedCoord<RangedCoordi32>>>;

/// Horizontal stacked bars: one bar per category (top to bottom), one segment per series
/// (`series[j].1[i]` is series j's part of category i), with a legend.
pub struct Stacked<'a> {
    pub title: &'a str,
    /// The value axis' description.
    pub x_desc: &'a str,
    /// The category axis' description.
    pub y_desc: &'a str,
    pub categories: Vec<String>,
    pub series: Vec<(String, Vec<f64>)>,
}

impl Stacked<'_> {
    pub fn draw(&self) -> Result<String> {
        let n = self.categories.len().max(1);
        let height = (n as u32 * 28 + 150).clamp(220, 1400);
        let totals: Vec<f64> = (0..n)
            .map(|i| {
                self.series
                    .iter()
                    .map(|(_, v)| fin(v.get(i).copied().unwrap_or(0.0)).max(0.0))
                    .sum()
            })
            .collect();
        let max = totals.iter().copied().fold(0.0, f64::max);
        let labels: Vec<String> = self.categories.iter().map(|c| clip(c, 40)).collect();
        let keys = keys_of(self.series.iter().map(|(n, _)| n.as_str()), false);
        svg(height, &keys, |root| {
            let axes = (self.title, self.x_desc, self.y_desc);
            let area = label_area(&labels);
            let mut chart = hbar_axes(root, axes, span(0.0, max), n, area, |top| {
                labels.get(top).cloned().unwrap_or_default()
            })?;
            let mut base = vec![0.0; n];
            for (j, (_, values)) in self.series.iter().enumerate() {
                let c = color(j);
                let bars: Vec<Rectangle<(f64, SegmentValue<i32>)>> = (0..n)
                    .map(|i| {
                        let v = fin(values.get(i).copied().unwrap_or(0.0)).max(0.0);
                        let row = (n - 1 - i) as i32;
                        let (x0, x1) = (base[i], base[i] + v);
                        base[i] = x1;
                        let mut r = Rectangle::new(
                            [
                                (x0, SegmentValue::Exact(row)),
                                (x1, SegmentValue::Exact(row + 1)),
                            ],
                            c.filled(),
                        );
                        r.set_margin(4, 4, 0, 0);
                        r
                    })
                    .collect();
                chart.draw_series(bars).map_err(err)?;
            }
            Ok(())
        })
    }
}

/// A Gantt chart: one row per lane (top to bottom), bars from start to end, colored by
/// group (a legend names the groups).
pub struct Gantt<'a> {
    pub title: &'a str,
    pub x_desc: &'a str,
    pub y_desc: &'a str,
    pub lanes: Vec<String>,
    /// (lane, start, end, group).
    pub bars: Vec<(usize, f64, f64, usize)>,
    pub groups: Vec<String>,
}

impl Gantt<'_> {
    pub fn draw(&self) -> Result<String> {
        let n = self.lanes.len().max(1);
        let height = (n as u32 * 36 + 170 + self.groups.len().min(12) as u32 * 6).clamp(240, 1400);
        let lo = self
            .bars
            .iter()
            .map(|b| fin(b.1))
            .fold(f64::INFINITY, f64::min);
        let hi = self.bars.iter().map(|b| fin(b.2)).fold(0.0, f64::max);
        // From a little before the first start: a run's copies before its first launch
        // would squeeze the kernels into a corner.
        let lo = if lo.is_finite() && hi > lo {
            (lo - (hi - lo) * 0.02).max(0.0)
        } else {
            0.0
        };
        let labels: Vec<String> = self.lanes.iter().map(|c| clip(c, 40)).collect();
        let keys = keys_of(self.groups.iter().take(12).map(String::as_str), false);
        svg(height, &keys, |root| {
            let axes = (self.title, self.x_desc, self.y_desc);
            let area = label_area(&labels);
            let mut chart = hbar_axes(root, axes, span(lo, hi), n, area, |top| {
                labels.get(top).cloned().unwrap_or_default()
            })?;
            for g in 0..self.groups.len() {
                let c = color(g);
                let mut bars = Vec::new();
                // A white outline tells back-to-back launches of one kernel apart.
                let mut outlines = Vec::new();
                for &(lane, s, e, _) in self.bars.iter().filter(|b| b.3 == g && b.0 < n) {
                    let row = (n - 1 - lane) as i32;
                    let (s, e) = (fin(s), fin(e).max(fin(s)));
                    let corners = [
                        (s, SegmentValue::Exact(row)),
                        (e, SegmentValue::Exact(row + 1)),
                    ];
                    let mut r = Rectangle::new(corners.clone(), c.filled());
                    r.set_margin(5, 5, 0, 0);
                    bars.push(r);
                    let mut o = Rectangle::new(corners, WHITE.stroke_width(1));
                    o.set_margin(5, 5, 0, 0);
                    outlines.push(o);
                }
                chart.draw_series(bars).map_err(err)?;
                chart.draw_series(outlines).map_err(err)?;
            }
            Ok(())
        })
    }
}

/// A line chart over a numeric x axis: one line per series (a missing point, `None`,
/// breaks its line), with a legend.
pub struct Lines<'a> {
    pub title: &'a str,
    pub x_desc: &'a str,
    pub y_desc: &'a str,
    pub series: Vec<Series>,
}

impl Lines<'_> {
    pub fn draw(&self) -> Result<String> {
        let pts = || {
            self.series
                .iter()
                .flat_map(|(_, p)| p.iter())
                .filter_map(|&(x, y)| Some((x, y?)))
                .filter(|(x, y)| x.is_finite() && y.is_finite())
        };
        let (x0, x1) = pts().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), (x, _)| {
            (a.min(x), b.max(x))
        });
        let y1 = pts().fold(0.0, |a: f64, (_, y)| a.max(y));
        let y0 = pts().fold(0.0, |a: f64, (_, y)| a.min(y));
        let x0 = if x0.is_finite() {
            fin(x0).min(0.0)
        } else {
            0.0
        };
        let x1 = if x1.is_finite() { fin(x1) } else { 1.0 };
        let xr = if x1 > x0 { x0..x1 } else { x0..x0 + 1.0 };
        let keys = keys_of(self.series.iter().map(|(n, _)| n.as_str()), true);
        svg(420, &keys, |root| {
            let mut chart = ChartBuilder::on(root)
                .caption(self.title, (FONT, 20))
                .margin(12)
                .x_label_area_size(44)
                .y_label_area_size(80)
                .build_cartesian_2d(xr, span(y0, y1))
                .map_err(err)?;
            chart
                .configure_mesh()
                .x_desc(self.x_desc)
                .x_label_formatter(&tick)
                .y_label_formatter(&tick)
                .y_desc(self.y_desc)
                .axis_desc_style((FONT, 14))
                .label_style((FONT, 12))
                .draw()
                .map_err(err)?;
            for (j, (_, points)) in self.series.iter().enumerate() {
                let c = color(j);
                // Runs of present, finite points.
                let mut runs: Vec<Vec<(f64, f64)>> = vec![Vec::new()];
                for &(x, y) in points {
                    match y {
                        Some(y) if x.is_finite() && y.is_finite() => {
                            if let Some(r) = runs.last_mut() {
                                r.push((x, y));
                            }
                        }
                        _ => runs.push(Vec::new()),
                    }
                }
                for run in runs.into_iter().filter(|r| !r.is_empty()) {
                    if run.len() == 1 {
                        chart
                            .draw_series(
                                run.into_iter()
                                    .map(|p| Circle::new(p, width(j) + 1, c.filled())),
                            )
                            .map_err(err)?;
                    } else {
                        chart
                            .draw_series(LineSeries::new(run, c.stroke_width(width(j))))
                            .map_err(err)?;
                    }
                }
            }
            Ok(())
        })
    }
}

/// A line chart over a categorical x axis (a swept parameter's values, in order): one
/// line with markers per series, a missing value breaking it.
pub struct Categorical<'a> {
    pub title: &'a str,
    pub x_desc: &'a str,
    pub y_desc: &'a str,
    pub categories: Vec<String>,
    pub series: Vec<(String, Vec<Option<f64>>)>,
}

impl Categorical<'_> {
    pub fn draw(&self) -> Result<String> {
        let n = self.categories.len().max(1);
        let vals = || {
            self.series
                .iter()
                .flat_map(|(_, v)| v.iter().flatten().copied())
                .filter(|y| y.is_finite())
        };
        // Fitted to the values (lines, not bars: no need to start at 0), so that the few
        // percent a parameter moves a metric show.
        let y1 = vals().map(fin).fold(f64::NEG_INFINITY, f64::max);
        let y0 = vals().map(fin).fold(f64::INFINITY, f64::min);
        let yr = if y1 > y0 {
            let pad = (y1 - y0) * 0.15;
            let lo = if y0 >= 0.0 {
                (y0 - pad).max(0.0)
            } else {
                y0 - pad
            };
            lo..y1 + pad
        } else if y1 == y0 {
            let pad = (y0.abs() * 0.05).max(1e-9);
            let lo = if y0 >= 0.0 {
                (y0 - pad).max(0.0)
            } else {
                y0 - pad
            };
            lo..y0 + pad
        } else {
            0.0..1.0
        };
        let labels: Vec<String> = self.categories.iter().map(|c| clip(c, 24)).collect();
        let keys = keys_of(self.series.iter().map(|(n, _)| n.as_str()), true);
        svg(400, &keys, |root| {
            let mut chart = ChartBuilder::on(root)
                .caption(self.title, (FONT, 20))
                .margin(12)
                .x_label_area_size(48)
                .y_label_area_size(90)
                .build_cartesian_2d(segs(n).into_segmented(), yr)
                .map_err(err)?;
            let labels = &labels;
            let fmt = move |v: &SegmentValue<i32>| match v {
                SegmentValue::CenterOf(i) => labels.get(*i as usize).cloned().unwrap_or_default(),
                _ => String::new(),
            };
            chart
                .configure_mesh()
                .disable_x_mesh()
                .x_desc(self.x_desc)
                .y_label_formatter(&tick)
                .y_desc(self.y_desc)
                .x_labels(n)
                .x_label_formatter(&fmt)
                .axis_desc_style((FONT, 14))
                .label_style((FONT, 12))
                .draw()
                .map_err(err)?;
            for (j, (_, values)) in self.series.iter().enumerate() {
                let c = color(j);
                let pts: Vec<(SegmentValue<i32>, f64)> = values
                    .iter()
                    .enumerate()
                    .filter_map(|(i, y)| {
                        let y = (*y)?;
                        y.is_finite()
                            .then_some((SegmentValue::CenterOf(i as i32), y))
                    })
                    .collect();
                let mut runs: Vec<Vec<(SegmentValue<i32>, f64)>> = vec![Vec::new()];
                for (i, y) in values.iter().enumerate() {
                    match y {
                        Some(y) if y.is_finite() => {
                            if let Some(r) = runs.last_mut() {
                                r.push((SegmentValue::CenterOf(i as i32), *y));
                            }
                        }
                        _ => runs.push(Vec::new()),
                    }
                }
                for run in runs.into_iter().filter(|r| r.len() > 1) {
                    chart
                        .draw_series(LineSeries::new(run, c.stroke_width(width(j))))
                        .map_err(err)?;
                }
                chart
                    .draw_series(
                        pts.into_iter()
                            .map(|p| Circle::new(p, width(j) + 2, c.filled())),
                    )
                    .map_err(err)?;
            }
            Ok(())
        })
    }
}

/// Horizontal grouped bars: one group per category (top to bottom), one bar per series in
/// it, with a legend.
pub struct Grouped<'a> {
    pub title: &'a str,
    pub x_desc: &'a str,
    pub y_desc: &'a str,
    pub categories: Vec<String>,
    pub series: Vec<(String, Vec<f64>)>,
}

impl Grouped<'_> {
    pub fn draw(&self) -> Result<String> {
        let n = self.categories.len().max(1);
        let k = self.series.len().max(1);
        // Each category takes k segments and a gap; its label sits on its first bar.
        let per = k + 1;
        let rows = n * per;
        let height = (rows as u32 * 16 + 150).clamp(220, 1600);
        let max = self
            .series
            .iter()
            .flat_map(|(_, v)| v.iter().copied())
            .map(fin)
            .fold(0.0, f64::max);
        let labels: Vec<String> = self.categories.iter().map(|c| clip(c, 40)).collect();
        // Segment of category i's bar j, counted from the bottom.
        let seg = move |i: usize, j: usize| (rows - 1 - (i * per + j)) as i32;
        let keys = keys_of(self.series.iter().map(|(n, _)| n.as_str()), false);
        svg(height, &keys, |root| {
            let axes = (self.title, self.x_desc, self.y_desc);
            let area = label_area(&labels);
            let mut chart = hbar_axes(root, axes, span(0.0, max), rows, area, |top| {
                match top.is_multiple_of(per) {
                    true => labels.get(top / per).cloned().unwrap_or_default(),
                    false => String::new(),
                }
            })?;
            for (j, (_, values)) in self.series.iter().enumerate() {
                let c = color(j);
                let bars: Vec<_> = (0..self.categories.len())
                    .map(|i| {
                        let v = fin(values.get(i).copied().unwrap_or(0.0)).max(0.0);
                        let s = seg(i, j);
                        let mut r = Rectangle::new(
                            [
                                (0.0, SegmentValue::Exact(s)),
                                (v, SegmentValue::Exact(s + 1)),
                            ],
                            c.filled(),
                        );
                        r.set_margin(1, 1, 0, 0);
                        r
                    })
                    .collect();
                chart.draw_series(bars).map_err(err)?;
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn degenerate_inputs_draw_without_panicking() {
        let s = Stacked {
            title: "t",
            x_desc: "x",
            y_desc: "y",
            categories: vec![],
            series: vec![("a".into(), vec![f64::NAN])],
        };
        assert!(s.draw().unwrap().contains("<svg"));
        let l = Lines {
            title: "t",
            x_desc: "time",
            y_desc: "v",
            series: vec![("a".into(), vec![(0.0, None), (f64::INFINITY, Some(1.0))])],
        };
        assert!(l.draw().unwrap().contains("time"));
        let g = Gantt {
            title: "t",
            x_desc: "x",
            y_desc: "y",
            lanes: vec!["GPU 0".into()],
            bars: vec![(3, 5.0, 1.0, 0)],
            groups: vec!["k".into()],
        };
        assert!(g.draw().unwrap().contains("GPU 0"));
        let c = Categorical {
            title: "t",
            x_desc: "p",
            y_desc: "v",
            categories: vec!["1".into(), "<2>".into()],
            series: vec![("s".into(), vec![None, Some(2.0)])],
        };
        let svg = c.draw().unwrap();
        assert!(svg.contains("&lt;2&gt;"), "labels are escaped");
        assert_eq!(clip("abcdef", 4), "abc…");
    }
}
