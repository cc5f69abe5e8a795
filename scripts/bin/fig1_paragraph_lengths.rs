//! Report 000, Figure 1: paragraph lengths (words per paragraph) of the Wikipedia
//! corpora before and after the length filter (keep 21–199 words), from
//! `workbench::study::lengths`.
//!
//! ```text
//! cargo run --release --bin fig1_paragraph_lengths [-- --force]
//! ```
//! Writes `data/results/fig1-paragraph-lengths/`: `fig1.png`, `fig1.svg`,
//! `bins.csv`, `counts.csv`, `counts.md`, `config.json`, `manifest.json`.

use anyhow::Result;
use clap::Parser;
use workbench::study::{self, lengths, Env};

#[derive(Parser, Debug)]
#[command(
    about = "Report 000 Figure 1: paragraph-length histogram before and after the length filter"
)]
struct Args {
    /// Corpora (asset names), one panel each (default: the three Wikipedia corpora).
    #[arg(long, value_delimiter = ',')]
    corpora: Option<Vec<String>>,
    /// Smallest kept paragraph, in words (report 000: dropped ≤ 20).
    #[arg(long, default_value_t = 21)]
    min_words: usize,
    /// Largest kept paragraph, in words (report 000: dropped ≥ 200).
    #[arg(long, default_value_t = 199)]
    max_words: usize,
    /// Histogram bin width, in words.
    #[arg(long, default_value_t = 10.0)]
    bin_width: f64,
    /// Paragraphs at least this long share one overflow bin.
    #[arg(long, default_value_t = 400.0)]
    overflow_at: f64,
    /// Recompute even if the results are fresh.
    #[arg(long)]
    force: bool,
}

fn main() -> Result<()> {
    let a = Args::parse();
    let env = Env::project()?;
    let d = lengths::LengthsParams::default();
    let valid = lengths::LengthsParams {
        corpora: a.corpora.unwrap_or(d.corpora),
        min_words: a.min_words,
        max_words: a.max_words,
        bin_width: a.bin_width,
        overflow_at: a.overflow_at,
    }
    .check()?;
    study::execute(&env, &valid, a.force)?;
    Ok(())
}
