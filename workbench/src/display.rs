//! Inline display in Jupyter through evcxr's display protocol.
//!
//! evcxr calls a value's `evcxr_display(&self)` method when the value ends a
//! cell. The method prints `EVCXR_BEGIN_CONTENT <mime>` … `EVCXR_END_CONTENT`
//! to stdout. [`Table`] renders as HTML; figures (`plot::Figure`) as PNG; polars
//! `DataFrame`s as HTML through [`DataFrameDisplay`] (feature `parquet`).

use crate::{Error, Result};
use serde::Serialize;
use std::path::Path;

/// Print content with a MIME type through evcxr's display protocol.
pub fn emit(mime: &str, content: &str) {
    println!("EVCXR_BEGIN_CONTENT {mime}\n{content}\nEVCXR_END_CONTENT");
}

/// A small table of strings with a header, shown as HTML in notebooks and
/// written as CSV or Markdown by scripts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Table {
    /// Optional caption.
    pub caption: Option<String>,
    /// Column names.
    pub header: Vec<String>,
    /// Rows; each has `header.len()` cells.
    pub rows: Vec<Vec<String>>,
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

impl Table {
    /// A table with these column names.
    pub fn new<S: Into<String>>(header: impl IntoIterator<Item = S>) -> Self {
        Table {
            caption: None,
            header: header.into_iter().map(Into::into).collect(),
            rows: Vec::new(),
        }
    }

    /// Set the caption.
    pub fn caption(mut self, c: impl Into<String>) -> Self {
        self.caption = Some(c.into());
        self
    }

    /// Append a row. Fails if its length differs from the header's.
    pub fn push<S: ToString>(&mut self, row: impl IntoIterator<Item = S>) -> Result<()> {
        let row: Vec<String> = row.into_iter().map(|c| c.to_string()).collect();
        if row.len() != self.header.len() {
            return Err(Error::param(
                "row",
                format!(
                    "has {} cells, the header has {}",
                    row.len(),
                    self.header.len()
                ),
            ));
        }
        self.rows.push(row);
        Ok(())
    }

    /// HTML rendering.
    pub fn to_html(&self) -> String {
        let mut s = String::from("<table>");
        if let Some(c) = &self.caption {
            s += &format!("<caption>{}</caption>", escape(c));
        }
        s += "<thead><tr>";
        for h in &self.header {
            s += &format!("<th>{}</th>", escape(h));
        }
        s += "</tr></thead><tbody>";
        for r in &self.rows {
            s += "<tr>";
            for c in r {
                s += &format!("<td>{}</td>", escape(c));
            }
            s += "</tr>";
        }
        s + "</tbody></table>"
    }

    /// GitHub Markdown rendering (for READMEs and logs): the caption, if any, as a
    /// paragraph above the table, then the table.
    pub fn to_markdown(&self) -> String {
        let esc = |c: &str| c.replace('|', "\\|");
        let mut s = match &self.caption {
            Some(c) => format!("{c}\n\n"),
            None => String::new(),
        };
        s += &format!(
            "| {} |\n",
            self.header
                .iter()
                .map(|h| esc(h))
                .collect::<Vec<_>>()
                .join(" | ")
        );
        s += &format!("|{}\n", "---|".repeat(self.header.len()));
        for r in &self.rows {
            s += &format!(
                "| {} |\n",
                r.iter().map(|c| esc(c)).collect::<Vec<_>>().join(" | ")
            );
        }
        s
    }

    /// Write as CSV.
    pub fn write_csv(&self, path: &Path) -> Result<()> {
        let mut w =
            csv::Writer::from_path(path).map_err(|e| Error::bad_input(path, e.to_string()))?;
        w.write_record(&self.header)
            .map_err(|e| Error::bad_input(path, e.to_string()))?;
        for r in &self.rows {
            w.write_record(r)
                .map_err(|e| Error::bad_input(path, e.to_string()))?;
        }
        w.flush().map_err(|e| Error::io(path, e))
    }

    /// Read a CSV file with a header line (as [`write_csv`](Self::write_csv) writes it),
    /// e.g. a result table in a notebook. Rows of another length than the header are an
    /// error naming the file.
    pub fn read_csv(path: &Path) -> Result<Self> {
        let mut r =
            csv::Reader::from_path(path).map_err(|e| Error::bad_input(path, e.to_string()))?;
        let header = r
            .headers()
            .map_err(|e| Error::bad_input(path, e.to_string()))?
            .iter()
            .map(String::from)
            .collect::<Vec<_>>();
        let mut t = Table::new(header);
        for rec in r.records() {
            let rec = rec.map_err(|e| Error::bad_input(path, e.to_string()))?;
            t.push(rec.iter())
                .map_err(|e| Error::bad_input(path, e.to_string()))?;
        }
        Ok(t)
    }

    /// evcxr display hook: shows the table as HTML.
    pub fn evcxr_display(&self) {
        emit("text/html", &self.to_html());
    }
}

impl std::fmt::Display for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_markdown())
    }
}

/// HTML table of a polars `DataFrame` (feature `parquet`): the column names and types in
/// the header, every row (nulls empty, floats to 4 decimals), the shape as the caption.
#[cfg(feature = "parquet")]
pub fn dataframe_html(df: &polars::prelude::DataFrame) -> String {
    use polars::prelude::AnyValue;
    let mut s = format!(
        "<table><caption>{} rows × {} columns</caption><thead><tr>",
        df.height(),
        df.width()
    );
    for c in df.columns() {
        s += &format!(
            "<th>{}<br><small>{}</small></th>",
            escape(c.name()),
            escape(&c.dtype().to_string())
        );
    }
    s += "</tr></thead><tbody>";
    for i in 0..df.height() {
        s += "<tr>";
        for c in df.columns() {
            let cell = match c.get(i) {
                Ok(AnyValue::Null) | Err(_) => String::new(),
                Ok(AnyValue::Float64(x)) => format!("{x:.4}"),
                Ok(AnyValue::Float32(x)) => format!("{x:.4}"),
                Ok(AnyValue::String(v)) => v.to_string(),
                Ok(AnyValue::StringOwned(v)) => v.to_string(),
                Ok(v) => v.to_string(),
            };
            s += &format!("<td>{}</td>", escape(&cell));
        }
        s += "</tr>";
    }
    s + "</tbody></table>"
}

/// Inline display of polars `DataFrame`s in evcxr (feature `parquet`): with
/// `use workbench::display::DataFrameDisplay;` in scope, a `DataFrame` that ends a cell
/// renders as the HTML of [`dataframe_html`], the way [`Table`] does.
#[cfg(feature = "parquet")]
pub trait DataFrameDisplay {
    /// evcxr display hook: the frame as an HTML table.
    fn evcxr_display(&self);
}

#[cfg(feature = "parquet")]
impl DataFrameDisplay for polars::prelude::DataFrame {
    fn evcxr_display(&self) {
        emit("text/html", &dataframe_html(self));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_round_trip() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("t.csv");
        let mut t = Table::new(["system", "score"]);
        t.push(["hybrid (dense, bm25)", "0.5"]).unwrap();
        t.push(["a \"quoted\" name", ""]).unwrap();
        t.write_csv(&p).unwrap();
        let back = Table::read_csv(&p).unwrap();
        assert_eq!(back, t);
        std::fs::write(&p, "a,b\n1,2,3\n").unwrap();
        assert!(Table::read_csv(&p).is_err());
    }

    #[test]
    fn markdown_has_the_caption_above_the_table() {
        let mut t = Table::new(["system", "EM"]).caption("Exact match on 3 questions");
        t.push(["a|b", "1.0"]).unwrap();
        assert_eq!(
            t.to_markdown(),
            "Exact match on 3 questions\n\n| system | EM |\n|---|---|\n| a\\|b | 1.0 |\n"
        );
        t.caption = None;
        assert_eq!(
            t.to_markdown(),
            "| system | EM |\n|---|---|\n| a\\|b | 1.0 |\n"
        );
    }

    #[cfg(feature = "parquet")]
    #[test]
    fn dataframe_as_html() {
        use polars::prelude::*;
        let df = df!("system" => ["a<b", "c"], "f1" => [Some(0.5), None]).unwrap();
        let h = dataframe_html(&df);
        assert!(h.contains("<caption>2 rows × 2 columns</caption>"), "{h}");
        assert!(h.contains("<th>system<br><small>str</small></th>"), "{h}");
        assert!(h.contains("<td>a&lt;b</td><td>0.5000</td>"), "{h}");
        assert!(h.contains("<td>c</td><td></td>"), "{h}");
    }
}
