//! Report 000, Figure 2: t-SNE of 500 paragraph embeddings, coloured by topic
//! (`workbench::study::tsne`), with the clustering the caption claims measured: k-NN
//! topic agreement in the map and in the 384-d space against chance and a permutation
//! test, and the silhouette of the topic labels.
//!
//! ```text
//! cargo run --release --bin fig2_tsne [-- --force]
//! ```
//! The study is the same at every scale (one result folder).
//!
//! Writes `data/results/fig2-tsne/`: `fig2.png`, `fig2.svg`, `points.csv` (id, title,
//! topic, x, y), `clustering.csv`, `clustering.md`, `per_topic.csv`, `config.json`,
//! `manifest.json`.

use anyhow::Result;
use clap::Parser;
use workbench::study::{self, tsne, Env};

#[derive(Parser, Debug)]
#[command(about = "Report 000 Figure 2: t-SNE of paragraph embeddings coloured by topic")]
struct Args {
    /// Paragraphs to embed and project (default 500).
    #[arg(long)]
    points: Option<usize>,
    /// Seed of the stratified sample and of the permutation test (default 42).
    #[arg(long)]
    sample_seed: Option<u64>,
    /// Sentence encoder asset (default all-minilm-l6-v2).
    #[arg(long)]
    model: Option<String>,
    /// t-SNE perplexity (default 30).
    #[arg(long)]
    perplexity: Option<f64>,
    /// Barnes-Hut threshold θ (default 0 = exact, the only reproducible setting with
    /// linfa-tsne 0.8).
    #[arg(long)]
    theta: Option<f64>,
    /// t-SNE iterations (default 1000).
    #[arg(long)]
    max_iter: Option<usize>,
    /// Seed of the t-SNE initial embedding (default 42).
    #[arg(long)]
    tsne_seed: Option<u64>,
    /// Neighbours for the k-NN topic agreement (default 10).
    #[arg(long)]
    knn: Option<usize>,
    /// Label permutations for the agreement's p-value (default 1000).
    #[arg(long)]
    permutations: Option<usize>,
    /// Recompute even if the results are fresh.
    #[arg(long)]
    force: bool,
}

fn main() -> Result<()> {
    let a = Args::parse();
    let env = Env::project()?;
    let d = tsne::TsneStudyParams::default();
    let p = tsne::TsneStudyParams {
        points: a.points.unwrap_or(d.points),
        sample_seed: a.sample_seed.unwrap_or(d.sample_seed),
        model: a.model.unwrap_or(d.model),
        perplexity: a.perplexity.unwrap_or(d.perplexity),
        theta: a.theta.unwrap_or(d.theta),
        max_iter: a.max_iter.unwrap_or(d.max_iter),
        tsne_seed: a.tsne_seed.unwrap_or(d.tsne_seed),
        knn: a.knn.unwrap_or(d.knn),
        permutations: a.permutations.unwrap_or(d.permutations),
        corpus: d.corpus,
    };
    let valid = p.check()?;
    study::execute(&env, &valid, a.force)?;
    Ok(())
}
