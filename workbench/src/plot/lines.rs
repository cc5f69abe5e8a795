//! Line plots of named curves sharing one x axis: Recall@k and answer-recall@k
//! curves, one line per system.

use super::{palette, DrawResult, Plot};
use plotters::coord::ranged1d::ValueFormatter;
use plotters::coord::Shift;
use plotters::prelude::*;
use serde::{Deserialize, Serialize};

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
    /// x-axis label.
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
    fn legend_on_top(&self, (x0, x1): (f64, f64), (y0, y1): (f64, f64)) -> bool {
        let log = self.log_x && x0 > 0.0;
        let at = |x: f64| {
            if log {
                (x.max(x0).ln() - x0.ln()) / (x1.ln() - x0.ln())
            } else {
                (x - x0) / (x1 - x0)
            }
        };
        let (mut low, mut high) = (0usize, 0usize);
        for &(x, y) in self.lines.iter().flat_map(|l| l.points.iter()) {
            if at(x) < 2.0 / 3.0 {
                continue;
            }
            let h = (y - y0) / (y1 - y0);
            low += usize::from(h < 1.0 / 3.0);
            high += usize::from(h > 2.0 / 3.0);
        }
        low > high
    }

    fn draw_lines<'a, DB: DrawingBackend + 'a, X: Ranged<ValueType = f64> + ValueFormatter<f64>>(
        &self,
        chart: &mut ChartContext<'a, DB, Cartesian2d<X, plotters::coord::types::RangedCoordf64>>,
        legend_on_top: bool,
    ) -> DrawResult<DB> {
        chart
            .configure_mesh()
            .x_desc(&self.x_label)
            // `{}` prints 10.0 as "10" and 2.5 as "2.5".
            .x_label_formatter(&|x| format!("{x}"))
            .y_desc(&self.y_label)
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
        root.fill(&WHITE)?;
        let (x0, x1) = self.bounds(|p| p.0);
        let (y0, y1) = self.y_range.unwrap_or_else(|| {
            let (lo, hi) = self.bounds(|p| p.1);
            let pad = (hi - lo) * 0.05;
            (lo - pad, hi + pad)
        });
        let on_top = self.legend_on_top((x0, x1), (y0, y1));
        let mut builder = ChartBuilder::on(root);
        builder
            .caption(&self.title, ("sans-serif", 20))
            .margin(14)
            .x_label_area_size(42)
            .y_label_area_size(55);
        if self.log_x && x0 > 0.0 {
            let x = (x0..x1).log_scale().with_key_points(log_ticks(x0, x1));
            let mut chart = builder.build_cartesian_2d(x, y0..y1)?;
            self.draw_lines(&mut chart, on_top)
        } else {
            let mut chart = builder.build_cartesian_2d(x0..x1, y0..y1)?;
            self.draw_lines(&mut chart, on_top)
        }
    }
}

/// Ticks 1, 2, 5 × 10ⁿ within `[lo, hi]`: readable labels on a log axis.
fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let mut ticks = Vec::new();
    let mut decade = 10f64.powf(lo.log10().floor());
    while decade <= hi {
        for m in [1.0, 2.0, 5.0] {
            let t = m * decade;
            if t >= lo && t <= hi {
                ticks.push(t);
            }
        }
        decade *= 10.0;
    }
    ticks
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
            assert!(!l.legend_on_top(l.bounds(|p| p.0), l.bounds(|p| p.1)));
        }
        // A falling loss curve ends low: the legend goes upper right.
        let mut l = lines(false);
        l.lines = vec![Line {
            label: "loss".into(),
            points: (0..100)
                .map(|i| (i as f64, 5.0 - 0.04 * i as f64))
                .collect(),
        }];
        assert!(l.legend_on_top(l.bounds(|p| p.0), l.bounds(|p| p.1)));
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
    fn log_ticks_are_one_two_five_per_decade() {
        assert_eq!(
            log_ticks(1.0, 100.0),
            vec![1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0]
        );
        assert_eq!(log_ticks(3.0, 40.0), vec![5.0, 10.0, 20.0]);
    }

    #[test]
    fn empty_plot_still_renders() {
        let mut l = lines(true);
        l.lines.clear();
        assert!(render(&l).is_ok());
    }
}
