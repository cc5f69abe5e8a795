//! Figures drawn with plotters, written as PNG and SVG, and shown inline in
//! notebooks (evcxr) as PNG.
//!
//! Text is rendered with an embedded DejaVu Sans font (plotters' `ab_glyph`
//! backend), so no system fonts are needed. A figure is anything that
//! implements [`Plot`]; [`render`] draws it once on a bitmap and once as SVG.
//!
//! To add a figure type: one file in this folder with a struct implementing
//! [`Plot`], plus a `pub use` below.

use crate::display::emit;
use crate::{Error, Result};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::Once;

mod bars;
mod histogram;
mod lines;
mod paragraph_lengths;
mod scatter;

pub use bars::Bars;
pub use histogram::{bin_counts, Bins, Histogram, HistogramGrid, Series};
pub use lines::{Line, Lines, LogY};
pub use paragraph_lengths::ParagraphLengths;
pub use scatter::{palette, Scatter};

static FONT: &[u8] = include_bytes!("../../assets/fonts/DejaVuSans.ttf");
static FONT_INIT: Once = Once::new();

/// Register the embedded font as `sans-serif` (idempotent).
pub fn ensure_fonts() {
    FONT_INIT.call_once(|| {
        // The embedded font is a valid TrueType file; a failure here would be a build defect.
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT);
        let _ = plotters::style::register_font("sans-serif", FontStyle::Bold, FONT);
    });
}

/// Error type of a plotters drawing on backend `DB`.
pub type DrawResult<DB> =
    std::result::Result<(), DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>>;

/// Something that can draw itself on any plotters backend.
pub trait Plot {
    /// Pixel size `(width, height)`.
    fn size(&self) -> (u32, u32);
    /// Draw on the root area.
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult<DB>;
}

/// A rendered figure: PNG bytes and SVG text.
#[derive(Debug, Clone)]
pub struct Figure {
    /// PNG-encoded image.
    pub png: Vec<u8>,
    /// SVG document.
    pub svg: String,
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
}

/// Render a plot to PNG and SVG.
pub fn render(plot: &impl Plot) -> Result<Figure> {
    ensure_fonts();
    let (w, h) = plot.size();
    let perr = |m: String| Error::Plot {
        path: PathBuf::from("<memory>"),
        message: m,
    };
    let mut rgb = vec![0u8; (w * h * 3) as usize];
    {
        let root = BitMapBackend::with_buffer(&mut rgb, (w, h)).into_drawing_area();
        plot.draw(&root).map_err(|e| perr(e.to_string()))?;
        root.present().map_err(|e| perr(e.to_string()))?;
    }
    let mut png = Vec::new();
    {
        use image::ImageEncoder;
        image::codecs::png::PngEncoder::new(&mut png)
            .write_image(&rgb, w, h, image::ColorType::Rgb8)
            .map_err(|e| perr(e.to_string()))?;
    }
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (w, h)).into_drawing_area();
        plot.draw(&root).map_err(|e| perr(e.to_string()))?;
        root.present().map_err(|e| perr(e.to_string()))?;
    }
    Ok(Figure {
        png,
        svg,
        width: w,
        height: h,
    })
}

impl Figure {
    /// Write `<dir>/<stem>.png` and `<dir>/<stem>.svg`; returns both paths.
    pub fn save(&self, dir: &Path, stem: &str) -> Result<(PathBuf, PathBuf)> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let png = dir.join(format!("{stem}.png"));
        let svg = dir.join(format!("{stem}.svg"));
        std::fs::write(&png, &self.png).map_err(|e| Error::io(&png, e))?;
        std::fs::write(&svg, &self.svg).map_err(|e| Error::io(&svg, e))?;
        Ok((png, svg))
    }

    /// evcxr display hook: shows the figure inline as PNG.
    pub fn evcxr_display(&self) {
        use base64::Engine;
        emit(
            "image/png",
            &base64::engine::general_purpose::STANDARD.encode(&self.png),
        );
    }
}
