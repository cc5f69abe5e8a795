//! Report 000, Figure 1: paragraph lengths (words per paragraph) of the Wikipedia
//! corpora before and after the length filter (keep 21–199 words).
//!
//! ```text
//! cargo run --release --bin fig1_paragraph_lengths [-- --force]
//! ```
//! Writes `data/results/fig1-paragraph-lengths/`: `fig1.png`, `fig1.svg`,
//! `bins.csv`, `counts.csv`, `config.json`, `manifest.json`.

use anyhow::{Context, Result};
use clap::Parser;
use serde::Serialize;
use workbench::assets::Assets;
use workbench::chunk::ParagraphParams;
use workbench::display::Table;
use workbench::load::wikipedia_corpus;
use workbench::plot::{render, Bins, HistogramGrid, ParagraphLengths};
use workbench::results::Experiment;

const NAME: &str = "fig1-paragraph-lengths";
/// Printed when the result is fresh and the run is skipped.
const SUMMARY_FILE: &str = "counts.md";

#[derive(Parser, Serialize, Debug)]
#[command(
    about = "Report 000 Figure 1: paragraph-length histogram before and after the length filter"
)]
struct Args {
    /// Corpora (asset names), one panel each.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "enwiki-sample-dump,wikitext-2-raw,wiki-leads-en"
    )]
    corpora: Vec<String>,
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
    #[serde(skip)]
    force: bool,
}

#[derive(Serialize)]
struct Config<'a> {
    args: &'a Args,
    filter: ParagraphParams,
    bins: Bins,
    /// sha256 of each corpus file, so new data invalidates the results.
    inputs: Vec<(String, String)>,
    /// sha256 of this program, so changed code invalidates the results.
    program_sha256: String,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let assets = Assets::load()?;
    let filter = ParagraphParams::default()
        .min_words(args.min_words)
        .max_words(args.max_words);
    let chunker = filter.clone().check()?;
    let bins = Bins::new(0.0, args.overflow_at, args.bin_width, true)?;
    let inputs = assets.input_checksums(args.corpora.iter().map(String::as_str))?;
    let config = Config {
        args: &args,
        filter,
        bins,
        inputs,
        program_sha256: workbench::results::executable_sha256()?,
    };
    let Some(exp) = Experiment::start(NAME, &config, args.force, SUMMARY_FILE)? else {
        return Ok(());
    };
    let out = &exp.out;

    let mut counts = Table::new([
        "corpus", "articles", "paragraphs", "kept", "too_short", "too_long", "kept_%", "mean_words_kept",
    ])
    .caption(format!(
        "Paragraph length filter (keep {}–{} words). Report 000: 525,665 → 184,051 paragraphs (35.0%) over 5,000 articles.",
        args.min_words, args.max_words
    ));
    let mut bins_csv = Table::new(["corpus", "bin", "lo", "hi", "all", "kept"]);
    let mut panels = Vec::new();
    let mut summary = serde_json::Map::new();
    for name in &args.corpora {
        let docs =
            wikipedia_corpus(&assets, name).with_context(|| format!("loading corpus `{name}`"))?;
        let m = ParagraphLengths::compute(name, &docs, &chunker)?;
        let s = m.stats;
        counts.push([
            name.clone(),
            m.articles.to_string(),
            s.total.to_string(),
            s.kept.to_string(),
            s.too_short.to_string(),
            s.too_long.to_string(),
            format!("{:.1}", m.kept_percent()),
            format!("{:.1}", m.mean_kept()),
        ])?;
        let (c_all, c_kept) = m.counts(&bins);
        for i in 0..bins.len() {
            let (lo, hi) = bins.edges(i);
            bins_csv.push([
                name.clone(),
                bins.label(i),
                lo.to_string(),
                hi.to_string(),
                c_all[i].to_string(),
                c_kept[i].to_string(),
            ])?;
        }
        summary.insert(name.clone(), serde_json::to_value(s)?);
        panels.push(m.histogram(bins));
    }
    let grid = HistogramGrid {
        caption: "Figure 1 (report 000): paragraph lengths before and after the length filter"
            .into(),
        panels,
        cols: 1,
        panel_size: (1000, 380),
    };
    let fig = render(&grid)?;
    fig.save(out.out_dir(), "fig1")?;
    counts.write_csv(&out.path("counts.csv"))?;
    std::fs::write(out.path("counts.md"), counts.to_markdown())?;
    bins_csv.write_csv(&out.path("bins.csv"))?;
    println!("{}", counts.caption.as_deref().unwrap_or(""));
    println!("{}", counts.to_markdown());
    exp.finish(serde_json::Value::Object(summary))?;
    Ok(())
}
