//! Histograms with overlaid series (report 000's Figure 1 paragraph lengths and
//! Figure 4 latencies), alone or as a grid of panels.

use super::{DrawResult, Plot};
use crate::{Error, Result};
use plotters::coord::Shift;
use plotters::prelude::*;
use serde::{Deserialize, Serialize};

/// Equal-width bins on `[lo, hi)`, plus an overflow bin for values `>= hi`
/// when `overflow` is set (values below `lo` are counted in the first bin).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Bins {
    /// Left edge of the first bin.
    pub lo: f64,
    /// Right edge of the last regular bin.
    pub hi: f64,
    /// Bin width.
    pub width: f64,
    /// Whether values `>= hi` get a last bin of their own.
    pub overflow: bool,
}

impl Bins {
    /// Validated bins.
    pub fn new(lo: f64, hi: f64, width: f64, overflow: bool) -> Result<Self> {
        if !(lo.is_finite() && hi.is_finite() && hi > lo) {
            return Err(Error::param(
                "hi",
                format!("bin range [{lo}, {hi}) is empty or not finite"),
            ));
        }
        if !(width.is_finite() && width > 0.0) {
            return Err(Error::param(
                "width",
                format!("bin width {width} must be positive"),
            ));
        }
        Ok(Bins {
            lo,
            hi,
            width,
            overflow,
        })
    }

    /// Number of regular bins.
    pub fn regular(&self) -> usize {
        ((self.hi - self.lo) / self.width).ceil() as usize
    }

    /// Total number of bins including the overflow bin.
    pub fn len(&self) -> usize {
        self.regular() + usize::from(self.overflow)
    }

    /// Always false: validated bins have at least one bin.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// `(left, right)` edges of bin `i`; the overflow bin is drawn one width wide.
    pub fn edges(&self, i: usize) -> (f64, f64) {
        let a = self.lo + i as f64 * self.width;
        (
            a,
            (a + self.width).min(if i < self.regular() {
                self.hi
            } else {
                a + self.width
            }),
        )
    }

    /// Bin index of a value (`None` for values `>= hi` without overflow, or NaN).
    pub fn index(&self, v: f64) -> Option<usize> {
        if v.is_nan() {
            return None;
        }
        if v >= self.hi {
            return self.overflow.then(|| self.regular());
        }
        let i = ((v - self.lo) / self.width).floor();
        Some(if i < 0.0 { 0 } else { i as usize })
    }

    /// Label of bin `i`, e.g. `20–30` or `≥400`.
    pub fn label(&self, i: usize) -> String {
        if self.overflow && i == self.regular() {
            format!("≥{}", self.hi)
        } else {
            let (a, b) = self.edges(i);
            format!("{a}–{b}")
        }
    }
}

/// Count values per bin. Values that fall in no bin are returned as the second item.
pub fn bin_counts(values: impl IntoIterator<Item = f64>, bins: &Bins) -> (Vec<usize>, usize) {
    let mut counts = vec![0usize; bins.len()];
    let mut outside = 0;
    for v in values {
        match bins.index(v) {
            Some(i) => counts[i] += 1,
            None => outside += 1,
        }
    }
    (counts, outside)
}

/// One overlaid series of a histogram.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Series {
    /// Legend label.
    pub label: String,
    /// Count per bin (same length as the bins).
    pub counts: Vec<usize>,
    /// RGB colour.
    pub color: (u8, u8, u8),
}

/// Dash patterns (pixels on, pixels off) of a histogram's vertical marker lines, in order.
pub const MARKER_DASHES: [(u32, u32); 3] = [(6, 4), (2, 3), (12, 4)];

/// A histogram panel: bins, overlaid series, axis labels, optional vertical markers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Histogram {
    /// Panel title.
    pub title: String,
    /// x-axis label.
    pub x_label: String,
    /// y-axis label.
    pub y_label: String,
    /// The bins.
    pub bins: Bins,
    /// Series drawn back to front.
    pub series: Vec<Series>,
    /// Vertical lines `(x, label)`: the first dashed, the second dotted, the third with
    /// long dashes ([`MARKER_DASHES`]), so a legend tells them apart.
    pub markers: Vec<(f64, String)>,
    /// Pixel size when drawn alone.
    pub size: (u32, u32),
}

/// Several histogram panels stacked in a grid.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistogramGrid {
    /// Overall caption, drawn at the top.
    pub caption: String,
    /// Panels, row by row.
    pub panels: Vec<Histogram>,
    /// Number of columns.
    pub cols: usize,
    /// Pixel size of one panel.
    pub panel_size: (u32, u32),
}

impl Histogram {
    /// Check that every series has one count per bin.
    pub fn check(&self) -> Result<()> {
        for s in &self.series {
            if s.counts.len() != self.bins.len() {
                return Err(Error::param(
                    "counts",
                    format!(
                        "series `{}` has {} counts for {} bins",
                        s.label,
                        s.counts.len(),
                        self.bins.len()
                    ),
                ));
            }
        }
        Ok(())
    }

    fn draw_on<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> DrawResult<DB> {
        let n = self.bins.len();
        let x_max = self.bins.edges(n - 1).1;
        let y_max = self
            .series
            .iter()
            .flat_map(|s| s.counts.iter().copied())
            .max()
            .unwrap_or(1)
            .max(1) as f64
            * 1.08;
        let mut chart = ChartBuilder::on(area)
            .caption(&self.title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(44)
            .y_label_area_size(64)
            .build_cartesian_2d(self.bins.lo..x_max, 0f64..y_max)?;
        let overflow_at = self
            .bins
            .overflow
            .then(|| self.bins.edges(self.bins.regular()).0);
        let hi = self.bins.hi;
        // Enough decimals for the tick spacing of sub-unit ranges (latencies in ms).
        let span = x_max - self.bins.lo;
        let decimals = if span >= 20.0 {
            0
        } else if span >= 2.0 {
            1
        } else if span >= 0.2 {
            2
        } else {
            3
        };
        chart
            .configure_mesh()
            .disable_x_mesh()
            .max_light_lines(0)
            .x_desc(&self.x_label)
            .y_desc(&self.y_label)
            .x_label_formatter(&|x| match overflow_at {
                Some(o) if *x >= o => format!("≥{hi}"),
                _ => tick_label(*x, decimals),
            })
            .y_label_formatter(&|y| format!("{y:.0}"))
            .label_style(("sans-serif", 14))
            .axis_desc_style(("sans-serif", 16))
            .draw()?;
        for s in &self.series {
            let c = RGBColor(s.color.0, s.color.1, s.color.2);
            chart
                .draw_series(s.counts.iter().enumerate().map(|(i, &k)| {
                    let (a, b) = self.bins.edges(i);
                    Rectangle::new([(a, 0.0), (b, k as f64)], c.mix(0.65).filled())
                }))?
                .label(&s.label)
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 6), (x + 14, y + 6)], c.mix(0.65).filled())
                });
        }
        for (i, (x, label)) in self.markers.iter().enumerate() {
            let x = *x;
            let (on, off) = MARKER_DASHES[i % MARKER_DASHES.len()];
            let drawn = chart.draw_series(DashedLineSeries::new(
                vec![(x, 0.0), (x, y_max)],
                on,
                off,
                BLACK.stroke_width(1),
            ))?;
            if !label.is_empty() {
                // The line's own dash pattern over 14 pixels (at most three dashes).
                let dash = |k: i32| {
                    let start = k * (on + off) as i32;
                    if start < 14 {
                        vec![(start, 0), ((start + on as i32).min(14), 0)]
                    } else {
                        vec![]
                    }
                };
                let (d0, d1, d2) = (dash(0), dash(1), dash(2));
                drawn.label(label).legend(move |(lx, ly)| {
                    EmptyElement::at((lx, ly))
                        + PathElement::new(d0.clone(), BLACK)
                        + PathElement::new(d1.clone(), BLACK)
                        + PathElement::new(d2.clone(), BLACK)
                });
            }
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.4))
            .label_font(("sans-serif", 14))
            .draw()?;
        Ok(())
    }
}

impl Plot for Histogram {
    fn size(&self) -> (u32, u32) {
        self.size
    }
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult<DB> {
        root.fill(&WHITE)?;
        self.draw_on(root)
    }
}

impl Plot for HistogramGrid {
    fn size(&self) -> (u32, u32) {
        let cols = self.cols.max(1);
        let rows = self.panels.len().div_ceil(cols).max(1);
        (
            self.panel_size.0 * cols as u32,
            self.panel_size.1 * rows as u32 + 40,
        )
    }
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult<DB> {
        root.fill(&WHITE)?;
        let root = root.titled(&self.caption, ("sans-serif", 22))?;
        let cols = self.cols.max(1);
        let rows = self.panels.len().div_ceil(cols).max(1);
        let areas = root.split_evenly((rows, cols));
        for (p, a) in self.panels.iter().zip(areas.iter()) {
            p.draw_on(a)?;
        }
        Ok(())
    }
}

/// `x` with `decimals` decimals; a value that rounds to zero prints without a sign
/// ("0.00", never "-0.00").
fn tick_label(x: f64, decimals: usize) -> String {
    let s = format!("{x:.decimals$}");
    match s.strip_prefix('-') {
        Some(rest) if rest.chars().all(|c| c == '0' || c == '.') => rest.to_string(),
        _ => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tick_labels_never_print_negative_zero() {
        assert_eq!(tick_label(-0.0001, 2), "0.00");
        assert_eq!(tick_label(-0.0, 0), "0");
        assert_eq!(tick_label(-0.25, 2), "-0.25");
        assert_eq!(tick_label(1.5, 1), "1.5");
    }

    #[test]
    fn binning_with_overflow() {
        let b = Bins::new(0.0, 30.0, 10.0, true).unwrap();
        assert_eq!(b.len(), 4);
        let (c, out) = bin_counts([0.0, 9.9, 10.0, 29.0, 30.0, 500.0, f64::NAN], &b);
        assert_eq!(c, vec![2, 1, 1, 2]);
        assert_eq!(out, 1);
        assert_eq!(b.label(3), "≥30");
        assert!(Bins::new(1.0, 1.0, 1.0, false).is_err());
        assert!(Bins::new(0.0, 1.0, 0.0, false).is_err());
    }

    #[test]
    fn renders_png_and_svg() {
        let b = Bins::new(0.0, 50.0, 10.0, true).unwrap();
        let h = Histogram {
            title: "t".into(),
            x_label: "words".into(),
            y_label: "count".into(),
            bins: b,
            series: vec![Series {
                label: "all".into(),
                counts: vec![1, 2, 3, 4, 5, 6],
                color: (100, 100, 100),
            }],
            markers: vec![(20.0, "min".into())],
            size: (400, 300),
        };
        h.check().unwrap();
        let f = super::super::render(&h).unwrap();
        assert_eq!(&f.png[1..4], b"PNG");
        assert!(f.svg.contains("<svg") && f.svg.contains("words"));
    }
}
