//! Line plots of named curves sharing one x axis: Recall@k and answer-recall@k
//! curves, one line per system.

use super::{palette, DrawResult, Plot};
use plotters::coord::ranged1d::ValueFormatter;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde::{Deserialize, Serialize};

/// Pixels per line of the notes under the x-axis label.
const NOTE_LINE_PX: u32 = 17;

/// The chart's margin on every side, pixels.
const MARGIN_PX: u32 = 14;

/// Height of the x-axis label area (ticks and label), pixels.
const X_LABEL_AREA_PX: u32 = 42;

/// Width of the y-axis label area, pixels.
const Y_LABEL_AREA_PX: u32 = 55;

/// Curves with more points than this are drawn without point markers.
const MAX_MARKED_POINTS: usize = 30;

/// One named curve.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Line {
    /// Legend label.
    pub label: String,
    /// Points `(x, y)`, drawn in the given order.
    pub points: Vec<(f64, f64)>,
}

/// Several curves over a shared x axis, with a legend naming each curve.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Lines {
    /// Title.
    pub title: String,
    /// x-axis label. Lines after the first (separated by `\n`) are drawn centred under the
    /// axis label, for conditions that do not fit on one line.
    pub x_label: String,
    /// y-axis label.
    pub y_label: String,
    /// The curves; colour `i` of [`palette`] goes to curve `i`.
    pub lines: Vec<Line>,
    /// Logarithmic x axis (for k = 1…100 curves whose interesting part is at small k).
    pub log_x: bool,
    /// Fixed y range; `None` fits the data.
    pub y_range: Option<(f64, f64)>,
    /// Pixel size.
    pub size: (u32, u32),
}

impl Lines {
    fn bounds(&self, f: fn(&(f64, f64)) -> f64) -> (f64, f64) {
        let all = self.lines.iter().flat_map(|l| l.points.iter());
        let (lo, hi) = all.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), p| {
            (lo.min(f(p)), hi.max(f(p)))
        });
        if lo.is_finite() && hi > lo {
            (lo, hi)
        } else if lo.is_finite() {
            (lo - 1.0, lo + 1.0)
        } else {
            (0.0, 1.0)
        }
    }

    /// Whether the legend goes in the upper right corner rather than the lower right: when
    /// more of the points in the right third of the plot lie in its lower third than in its
    /// upper third (a falling curve such as a training loss), the lower corner would cover
    /// them. `x` and `y` are the plotted ranges.
    fn legend_on_top(&self, (x0, x1): (f64, f64), (y0, y1): (f64, f64), log_y: bool) -> bool {
        let log = self.log_x && x0 > 0.0;
        let at = |x: f64| {
            if log {
                (x.max(x0).ln() - x0.ln()) / (x1.ln() - x0.ln())
            } else {
                (x - x0) / (x1 - x0)
            }
        };
        let height = |y: f64| {
            if log_y {
                (y.max(y0).ln() - y0.ln()) / (y1.ln() - y0.ln())
            } else {
                (y - y0) / (y1 - y0)
            }
        };
        let (mut low, mut high) = (0usize, 0usize);
        for &(x, y) in self.lines.iter().flat_map(|l| l.points.iter()) {
            if at(x) < 2.0 / 3.0 {
                continue;
            }
            let h = height(y);
            low += usize::from(h < 1.0 / 3.0);
            high += usize::from(h > 2.0 / 3.0);
        }
        low > high
    }

    fn draw_lines<'a, DB, X, Y>(
        &self,
        chart: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
        x_desc: &str,
        legend_on_top: bool,
        log_y: bool,
    ) -> DrawResult<DB>
    where
        DB: DrawingBackend + 'a,
        X: Ranged<ValueType = f64> + ValueFormatter<f64>,
        Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
    {
        // `{}` prints 10.0 as "10" and 2.5 as "2.5".
        let plain = |v: &f64| format!("{v}");
        let mut mesh = chart.configure_mesh();
        mesh.x_desc(x_desc).x_label_formatter(&plain);
        if log_y {
            // The 1-2-5 ticks of a log axis are whole numbers or short decimals.
            mesh.y_label_formatter(&plain);
        }
        mesh.y_desc(&self.y_label)
            .label_style(("sans-serif", 13))
            .axis_desc_style(("sans-serif", 15))
            .draw()?;
        for (i, line) in self.lines.iter().enumerate() {
            let col = palette(i);
            chart
                .draw_series(LineSeries::new(
                    line.points.iter().copied(),
                    col.stroke_width(2),
                ))?
                .label(&line.label)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], col.stroke_width(3))
                });
            // Markers only where they stay readable.
            if line.points.len() <= MAX_MARKED_POINTS {
                chart.draw_series(line.points.iter().map(|&p| Circle::new(p, 3, col.filled())))?;
            }
        }
        chart
            .configure_series_labels()
            .position(if legend_on_top {
                SeriesLabelPosition::UpperRight
            } else {
                SeriesLabelPosition::LowerRight
            })
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK.mix(0.4))
            .label_font(("sans-serif", 14))
            .draw()?;
        Ok(())
    }
}

impl Plot for Lines {
    fn size(&self) -> (u32, u32) {
        self.size
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult<DB> {
        self.draw_on(root, false)
    }
}

/// [`Lines`] on a logarithmic y axis as well (its `log_x` still applies): rates that span
/// decades, such as queries per second against corpus size. With any y value ≤ 0 the
/// axis stays linear.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogY(pub Lines);

impl Plot for LogY {
    fn size(&self) -> (u32, u32) {
        self.0.size
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult<DB> {
        self.0.draw_on(root, true)
    }
}

impl Lines {
    fn draw_on<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, Shift>,
        log_y: bool,
    ) -> DrawResult<DB> {
        root.fill(&WHITE)?;
        // The axis label's first line goes to the axis; the others into a strip below.
        let mut label = self.x_label.lines();
        let x_desc = label.next().unwrap_or("");
        let below: Vec<&str> = label.collect();
        let root = if below.is_empty() {
            root.clone()
        } else {
            let (w, h) = root.dim_in_pixel();
            let strip = NOTE_LINE_PX * below.len() as u32 + 6;
            let (upper, lower) = root.split_vertically(h.saturating_sub(strip));
            let style = ("sans-serif", 13)
                .into_text_style(&lower)
                .pos(Pos::new(HPos::Center, VPos::Top));
            // Centred under the plotting area, as the axis label above them is.
            let left = MARGIN_PX + Y_LABEL_AREA_PX;
            let centre = left + w.saturating_sub(left + MARGIN_PX) / 2;
            for (i, text) in below.iter().enumerate() {
                lower.draw_text(
                    text,
                    &style,
                    (centre as i32, (NOTE_LINE_PX * i as u32) as i32),
                )?;
            }
            upper
        };
        let root = &root;
        let (x0, x1) = self.bounds(|p| p.0);
        let (lo, hi) = self.bounds(|p| p.1);
        let log_y = log_y && lo > 0.0;
        let (y0, y1) = self.y_range.unwrap_or_else(|| {
            if log_y {
                // 5 % of the span in log space on either side.
                let pad = (hi / lo).powf(0.05);
                (lo / pad, hi * pad)
            } else {
                let pad = (hi - lo) * 0.05;
                (lo - pad, hi + pad)
            }
        });
        let log_y = log_y && y0 > 0.0;
        let on_top = self.legend_on_top((x0, x1), (y0, y1), log_y);
        let mut builder = ChartBuilder::on(root);
        builder
            .caption(&self.title, ("sans-serif", 20))
            .margin(MARGIN_PX)
            .x_label_area_size(X_LABEL_AREA_PX)
            .y_label_area_size(Y_LABEL_AREA_PX);
        let log_x = self.log_x && x0 > 0.0;
        let lx = || (x0..x1).log_scale().with_key_points(log_ticks(x0, x1));
        let ly = || (y0..y1).log_scale().with_key_points(log_ticks(y0, y1));
        match (log_x, log_y) {
            (true, true) => self.draw_lines(
                &mut builder.build_cartesian_2d(lx(), ly())?,
                x_desc,
                on_top,
                true,
            ),
            (true, false) => self.draw_lines(
                &mut builder.build_cartesian_2d(lx(), y0..y1)?,
                x_desc,
                on_top,
                false,
            ),
            (false, true) => self.draw_lines(
                &mut builder.build_cartesian_2d(x0..x1, ly())?,
                x_desc,
                on_top,
                true,
            ),
            (false, false) => self.draw_lines(
                &mut builder.build_cartesian_2d(x0..x1, y0..y1)?,
                x_desc,
                on_top,
                false,
            ),
        }
    }
}

/// Ticks 1, 2, 5 × 10ⁿ within `[lo, hi]`: readable labels on a log axis. A range too
/// narrow for two of them gets every 1…9 × 10ⁿ in it, and one narrower still its two ends
/// rounded inwards to a multiple of the power of ten below the range's span (or of the next
/// power down, where that leaves fewer than two). A range of one value gets that value.
fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    if !(lo > 0.0 && hi.is_finite()) {
        return Vec::new();
    }
    if hi <= lo {
        return vec![lo];
    }
    // m × 10ᵉ, dividing for e < 0 so that 3 × 10⁻¹ is 0.3 and not 0.30000000000000004.
    let at = |m: f64, e: i32| {
        if e < 0 {
            m / 10f64.powi(-e)
        } else {
            m * 10f64.powi(e)
        }
    };
    let within = |mantissas: &[f64]| {
        let mut ticks = Vec::new();
        let mut e = lo.log10().floor() as i32;
        while at(1.0, e) <= hi {
            for &m in mantissas {
                let t = at(m, e);
                if t >= lo && t <= hi {
                    ticks.push(t);
                }
            }
            e += 1;
        }
        ticks
    };
    let ticks = within(&[1.0, 2.0, 5.0]);
    if ticks.len() >= 2 {
        return ticks;
    }
    let ticks = within(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]);
    if ticks.len() >= 2 {
        return ticks;
    }
    // v / 10ᵉ, multiplying for e < 0 (1.1 / 0.1 is 11.000000000000002), and snapped to a
    // whole number within rounding error, so that ceil and floor do not step past it.
    let over = |v: f64, e: i32| {
        let x = if e < 0 {
            v * 10f64.powi(-e)
        } else {
            v / 10f64.powi(e)
        };
        if (x - x.round()).abs() < 1e-9 * x.abs().max(1.0) {
            x.round()
        } else {
            x
        }
    };
    // A span of 10ᵗ or more holds at least nine multiples of 10ᵗ⁻¹.
    let top = (hi - lo).log10().floor() as i32;
    for e in [top, top - 1] {
        let (a, b) = (over(lo, e).ceil(), over(hi, e).floor());
        if a < b {
            return vec![at(a, e), at(b, e)];
        }
    }
    vec![lo, hi]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plot::render;

    fn lines(log_x: bool) -> Lines {
        Lines {
            title: "t".into(),
            x_label: "k".into(),
            y_label: "recall (%)".into(),
            lines: vec![
                Line {
                    label: "BM25".into(),
                    points: vec![(1.0, 10.0), (10.0, 40.0), (100.0, 60.0)],
                },
                Line {
                    label: "dense".into(),
                    points: vec![(1.0, 20.0), (10.0, 50.0), (100.0, 70.0)],
                },
            ],
            log_x,
            y_range: None,
            size: (400, 300),
        }
    }

    #[test]
    fn legend_leaves_the_corner_a_curve_ends_in() {
        // Rising recall curves end high: the legend stays lower right.
        for log_x in [false, true] {
            let l = lines(log_x);
            assert!(!l.legend_on_top(l.bounds(|p| p.0), l.bounds(|p| p.1), false));
        }
        // A falling loss curve ends low: the legend goes upper right.
        let mut l = lines(false);
        l.lines = vec![Line {
            label: "loss".into(),
            points: (0..100)
                .map(|i| (i as f64, 5.0 - 0.04 * i as f64))
                .collect(),
        }];
        assert!(l.legend_on_top(l.bounds(|p| p.0), l.bounds(|p| p.1), false));
    }

    #[test]
    fn renders_linear_and_log_axes_with_labels_in_svg() {
        for log_x in [false, true] {
            let fig = render(&lines(log_x)).unwrap();
            assert!(fig.png.starts_with(b"\x89PNG"));
            assert!(fig.svg.contains("BM25") && fig.svg.contains("dense"));
            assert!(fig.svg.contains("recall (%)"));
        }
    }

    #[test]
    fn lines_after_the_first_of_the_x_label_are_drawn_below_it() {
        let mut l = lines(false);
        l.x_label = "k\nCPU flags: avx512f amx".into();
        let svg = render(&l).unwrap().svg;
        assert!(
            svg.contains(">\nk\n</text>"),
            "the axis label is its first line"
        );
        assert!(svg.contains("CPU flags: avx512f amx"));
        assert!(!svg.contains("k\nCPU"), "the lines are drawn apart");
        // The note is below the axis label and centred as it is (on the plotting area).
        let (lx, ly) = text_at(&svg, ">\nk\n</text>");
        let (nx, ny) = text_at(&svg, "CPU flags: avx512f amx");
        assert!(ny > ly, "note at y {ny}, label at y {ly}");
        assert!((nx - lx).abs() <= 2.0, "note at x {nx}, label at x {lx}");
    }

    /// The `x` and `y` attributes of the SVG `<text>` element that holds `needle`.
    fn text_at(svg: &str, needle: &str) -> (f64, f64) {
        let end = svg.find(needle).expect(needle);
        let start = svg[..end].rfind("<text").expect("a <text> element");
        let tag = &svg[start..end];
        let attr = |name: &str| -> f64 {
            let key = format!(" {name}=\"");
            let from = tag.find(&key).expect(&key) + key.len();
            let len = tag[from..].find('"').expect("closing quote");
            tag[from..from + len].parse().expect("a number")
        };
        (attr("x"), attr("y"))
    }

    #[test]
    fn log_y_puts_decades_on_the_y_axis() {
        // x from 1 to 3, so that no x tick reads like a y decade.
        let mut l = lines(false);
        l.lines[0].points = vec![(1.0, 10.0), (2.0, 1_000.0), (3.0, 100_000.0)];
        l.lines[1].points = vec![(1.0, 20.0), (2.0, 2_000.0), (3.0, 200_000.0)];
        let tick = |svg: &str, t: &str| svg.contains(&format!(">\n{t}\n</text>"));
        let log = render(&LogY(l.clone())).unwrap().svg;
        assert!(tick(&log, "100") && tick(&log, "1000") && tick(&log, "10000"));
        // On a linear axis the small decades get no tick.
        let linear = render(&l).unwrap().svg;
        assert!(!tick(&linear, "100") && !tick(&linear, "1000"));
        // A value ≤ 0 keeps the axis linear instead of failing.
        l.lines[0].points[0].1 = 0.0;
        assert!(render(&LogY(l)).is_ok());
    }

    #[test]
    fn log_ticks_are_one_two_five_per_decade() {
        assert_eq!(
            log_ticks(1.0, 100.0),
            vec![1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0]
        );
        assert_eq!(log_ticks(3.0, 40.0), vec![5.0, 10.0, 20.0]);
        // Narrower ranges still get two ticks or more.
        assert_eq!(log_ticks(25.0, 45.0), vec![30.0, 40.0]);
        assert_eq!(log_ticks(261_000.0, 284_000.0), vec![270_000.0, 280_000.0]);
        assert_eq!(log_ticks(271_500.0, 279_500.0), vec![272_000.0, 279_000.0]);
        assert_eq!(log_ticks(0.25, 0.45), vec![0.3, 0.4]);
        // One multiple of the span's power of ten inside: the next power down.
        assert_eq!(log_ticks(155_000.0, 263_000.0), vec![160_000.0, 260_000.0]);
        assert_eq!(log_ticks(2.0, 2.0), vec![2.0]);
        // Ends that are multiples of a negative power of ten are ticks themselves.
        assert_eq!(log_ticks(1.1, 1.9), vec![1.1, 1.9]);
        assert!(log_ticks(0.0, 40.0).is_empty() && log_ticks(-1.0, 40.0).is_empty());
    }

    #[test]
    fn empty_plot_still_renders() {
        let mut l = lines(true);
        l.lines.clear();
        assert!(render(&l).is_ok());
    }
}
