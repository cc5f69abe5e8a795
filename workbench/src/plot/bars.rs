//! Grouped bar charts: one group per category (a reader), one bar per series (EM, F1),
//! the value printed above each bar (report 000's Figure 3).

use super::{palette, DrawResult, Plot};
use plotters::coord::Shift;
use plotters::prelude::*;
use serde::{Deserialize, Serialize};

/// A grouped bar chart. `values[s][c]` is series `s` of category `c`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bars {
    /// Title.
    pub title: String,
    /// x-axis title (under the category labels; empty: none).
    pub x_label: String,
    /// y-axis label.
    pub y_label: String,
    /// Category labels (x axis).
    pub categories: Vec<String>,
    /// Series labels (legend).
    pub series: Vec<String>,
    /// `values[series][category]`.
    pub values: Vec<Vec<f64>>,
    /// y range (default 0 to 5 % above the largest value).
    pub y_max: Option<f64>,
    /// Pixel size.
    pub size: (u32, u32),
}

impl Plot for Bars {
    fn size(&self) -> (u32, u32) {
        self.size
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult<DB> {
        root.fill(&WHITE)?;
        let n_cat = self.categories.len().max(1);
        let n_ser = self.series.len().max(1);
        let top = self.y_max.unwrap_or_else(|| {
            let m = self.values.iter().flatten().copied().fold(0.0, f64::max);
            (m * 1.1).max(1.0)
        });
        let mut chart = ChartBuilder::on(root)
            .caption(&self.title, ("sans-serif", 20))
            .margin(14)
            .x_label_area_size(60)
            .y_label_area_size(55)
            .build_cartesian_2d(0.0..n_cat as f64, 0.0..top)?;
        let cats = self.categories.clone();
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_desc(&self.x_label)
            .y_desc(&self.y_label)
            .x_labels(n_cat * 2 + 1)
            .x_label_formatter(&|x: &f64| {
                let i = x.floor() as usize;
                if (x - i as f64 - 0.5).abs() < 1e-6 {
                    cats.get(i).cloned().unwrap_or_default()
                } else {
                    String::new()
                }
            })
            .label_style(("sans-serif", 13))
            .draw()?;
        let width = 0.8 / n_ser as f64;
        for (s, label) in self.series.iter().enumerate() {
            let color = palette(s);
            let vals = self.values.get(s).cloned().unwrap_or_default();
            let bars: Vec<(f64, f64, f64)> = vals
                .iter()
                .enumerate()
                .map(|(c, &v)| {
                    let x0 = c as f64 + 0.1 + s as f64 * width;
                    (x0, x0 + width * 0.95, v)
                })
                .collect();
            chart
                .draw_series(
                    bars.iter()
                        .map(|&(x0, x1, v)| Rectangle::new([(x0, 0.0), (x1, v)], color.filled())),
                )?
                .label(label.clone())
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled())
                });
            chart.draw_series(bars.iter().map(|&(x0, x1, v)| {
                Text::new(
                    format!("{v:.1}"),
                    ((x0 + x1) / 2.0 - width * 0.25, v + top * 0.01 + top * 0.03),
                    ("sans-serif", 12),
                )
            }))?;
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperRight)
            .label_font(("sans-serif", 13))
            .draw()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plot::render;

    #[test]
    fn renders_categories_series_and_values() {
        let b = Bars {
            title: "t".into(),
            x_label: "reader".into(),
            y_label: "score (%)".into(),
            categories: vec!["reader A".into(), "reader B".into()],
            series: vec!["EM".into(), "F1".into()],
            values: vec![vec![66.7, 33.3], vec![70.0, 40.5]],
            y_max: Some(100.0),
            size: (600, 400),
        };
        let fig = render(&b).unwrap();
        assert!(fig.png.starts_with(b"\x89PNG"));
        for s in ["reader A", "reader B", "reader", "EM", "F1", "66.7", "40.5"] {
            assert!(fig.svg.contains(s), "{s} missing from the SVG");
        }
    }
}
