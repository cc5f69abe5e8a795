//! Scatter plots of 2-D points coloured by a category (report 000's Figure 2, t-SNE).

use super::{DrawResult, Plot};
use plotters::coord::Shift;
use plotters::prelude::*;
use serde::{Deserialize, Serialize};

/// A categorical scatter plot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Scatter {
    /// Title.
    pub title: String,
    /// x-axis label.
    pub x_label: String,
    /// y-axis label.
    pub y_label: String,
    /// Points `(x, y, category index)`.
    pub points: Vec<(f64, f64, usize)>,
    /// Category names (legend), indexed by the points' category.
    pub categories: Vec<String>,
    /// Pixel size.
    pub size: (u32, u32),
}

/// A qualitative palette (Tableau 20 order), cycled for more categories.
pub fn palette(i: usize) -> RGBColor {
    const P: [(u8, u8, u8); 20] = [
        (31, 119, 180),
        (255, 127, 14),
        (44, 160, 44),
        (214, 39, 40),
        (148, 103, 189),
        (140, 86, 75),
        (227, 119, 194),
        (127, 127, 127),
        (188, 189, 34),
        (23, 190, 207),
        (174, 199, 232),
        (255, 187, 120),
        (152, 223, 138),
        (255, 152, 150),
        (197, 176, 213),
        (196, 156, 148),
        (247, 182, 210),
        (199, 199, 199),
        (219, 219, 141),
        (158, 218, 229),
    ];
    let (r, g, b) = P[i % P.len()];
    RGBColor(r, g, b)
}

impl Plot for Scatter {
    fn size(&self) -> (u32, u32) {
        self.size
    }
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult<DB> {
        root.fill(&WHITE)?;
        let (root, legend_area) = root.split_horizontally(self.size.0.saturating_sub(260));
        let bounds = |f: fn(&(f64, f64, usize)) -> f64| {
            let lo = self.points.iter().map(f).fold(f64::INFINITY, f64::min);
            let hi = self.points.iter().map(f).fold(f64::NEG_INFINITY, f64::max);
            if lo.is_finite() && hi > lo {
                let pad = (hi - lo) * 0.04;
                (lo - pad)..(hi + pad)
            } else {
                -1.0..1.0
            }
        };
        let mut chart = ChartBuilder::on(&root)
            .caption(&self.title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(50)
            .build_cartesian_2d(bounds(|p| p.0), bounds(|p| p.1))?;
        chart
            .configure_mesh()
            .max_light_lines(0)
            .x_desc(&self.x_label)
            .y_desc(&self.y_label)
            .label_style(("sans-serif", 13))
            .axis_desc_style(("sans-serif", 15))
            .draw()?;
        for (c, _) in self.categories.iter().enumerate() {
            let col = palette(c);
            chart.draw_series(
                self.points
                    .iter()
                    .filter(|p| p.2 == c)
                    .map(|p| Circle::new((p.0, p.1), 3, col.mix(0.8).filled())),
            )?;
        }
        // Legend in its own column, with the count per category.
        let legend = legend_area.margin(50, 10, 10, 10);
        for (c, name) in self.categories.iter().enumerate() {
            let n = self.points.iter().filter(|p| p.2 == c).count();
            let y = 10 + 22 * c as i32;
            legend.draw(&Circle::new((8, y), 5, palette(c).filled()))?;
            legend.draw(&Text::new(
                format!("{name} ({n})"),
                (20, y - 7),
                ("sans-serif", 14),
            ))?;
        }
        Ok(())
    }
}
