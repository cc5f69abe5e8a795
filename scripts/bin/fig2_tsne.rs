//! Report 000, Figure 2: t-SNE of 500 paragraph embeddings, coloured by topic.
//!
//! ```text
//! cargo run --release --bin fig2_tsne [-- --force]
//! ```
//! Paragraphs of the Wikipedia lead sections (`wiki-leads-en`, report 000's length
//! filter: 21–199 words), a seeded sample stratified over the corpus' 12 `topic`
//! labels (equal allocation), embedded with all-MiniLM-L6-v2 (384-d, mean pooling,
//! normalised) and projected with linfa-tsne (Barnes-Hut, seed explicit).
//!
//! The caption claims topical clustering; the program checks it with numbers:
//! the k-NN topic agreement (share of each point's k nearest neighbours with the
//! same topic) in the 2-D map and in the 384-d space (cosine), against chance
//! (the agreement expected of a random neighbour, Σ n_c(n_c−1)/(n(n−1))) and a
//! label-permutation test, plus the silhouette of the topic labels.
//!
//! Writes `data/results/fig2-tsne/`: `fig2.png`, `fig2.svg`, `points.csv`
//! (id, title, topic, x, y), `clustering.csv`, `clustering.md`, `per_topic.csv`,
//! `config.json`, `manifest.json`.

use anyhow::{bail, Context, Result};
use clap::Parser;
use rand::seq::index::sample;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Instant;
use workbench::analysis::{tsne_2d, TsneParams};
use workbench::assets::Assets;
use workbench::chunk::{Chunker, ParagraphParams};
use workbench::display::Table;
use workbench::encode::{dot, BertEncoder, EmbeddingCache, EncoderParams};
use workbench::load::wikipedia_corpus;
use workbench::plot::{render, Scatter};
use workbench::results::Experiment;

const NAME: &str = "fig2-tsne";
/// Printed when the result is fresh and the run is skipped.
const SUMMARY_FILE: &str = "clustering.md";
const CORPUS: &str = "wiki-leads-en";

#[derive(Parser, Serialize, Debug)]
#[command(about = "Report 000 Figure 2: t-SNE of paragraph embeddings coloured by topic")]
struct Args {
    /// Paragraphs to embed and project.
    #[arg(long, default_value_t = 500)]
    points: usize,
    /// Seed of the stratified sample and of the permutation test.
    #[arg(long, default_value_t = 42)]
    sample_seed: u64,
    /// Sentence encoder (asset name).
    #[arg(long, default_value = "all-minilm-l6-v2")]
    model: String,
    /// t-SNE perplexity.
    #[arg(long, default_value_t = 30.0)]
    perplexity: f64,
    /// Barnes-Hut threshold θ (0 = exact). Exact by default: linfa-tsne 0.8's Barnes-Hut
    /// path (bhtsne 0.4) builds its vantage-point tree with `rand::thread_rng`, so with
    /// θ > 0 the map changes from run to run whatever the seed; exact t-SNE on 500
    /// points takes seconds and is reproducible.
    #[arg(long, default_value_t = 0.0)]
    theta: f64,
    /// t-SNE iterations.
    #[arg(long, default_value_t = 1000)]
    max_iter: usize,
    /// Seed of the t-SNE initial embedding.
    #[arg(long, default_value_t = 42)]
    tsne_seed: u64,
    /// Neighbours for the k-NN topic agreement.
    #[arg(long, default_value_t = 10)]
    knn: usize,
    /// Label permutations for the agreement's p-value.
    #[arg(long, default_value_t = 1000)]
    permutations: usize,
    /// Recompute even if the results are fresh.
    #[arg(long)]
    #[serde(skip)]
    force: bool,
}

#[derive(Serialize)]
struct Config<'a> {
    args: &'a Args,
    corpus: &'static str,
    filter: ParagraphParams,
    encoder: EncoderParams,
    tsne: TsneParams,
    sampling: &'static str,
    inputs: Vec<(String, String)>,
    program_sha256: String,
}

/// Indices of the `k` nearest neighbours of every point (itself excluded), by a
/// distance function; ties by index.
fn knn(n: usize, k: usize, dist: impl Fn(usize, usize) -> f64) -> Vec<Vec<usize>> {
    (0..n)
        .map(|i| {
            let mut d: Vec<(f64, usize)> = (0..n)
                .filter(|&j| j != i)
                .map(|j| (dist(i, j), j))
                .collect();
            d.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            d.into_iter().take(k).map(|x| x.1).collect()
        })
        .collect()
}

/// Mean over points of the share of their neighbours with the same label, and per label.
fn agreement(neigh: &[Vec<usize>], labels: &[usize], n_labels: usize) -> (f64, Vec<f64>) {
    let mut per = vec![(0.0, 0usize); n_labels];
    let mut total = 0.0;
    for (i, nb) in neigh.iter().enumerate() {
        let a = nb.iter().filter(|&&j| labels[j] == labels[i]).count() as f64 / nb.len() as f64;
        total += a;
        per[labels[i]].0 += a;
        per[labels[i]].1 += 1;
    }
    (
        total / neigh.len() as f64,
        per.iter()
            .map(|(s, c)| if *c > 0 { s / *c as f64 } else { f64::NAN })
            .collect(),
    )
}

/// Mean silhouette of the labels under a distance (Rousseeuw 1987), and per label.
fn silhouette(
    n: usize,
    labels: &[usize],
    n_labels: usize,
    dist: impl Fn(usize, usize) -> f64,
) -> (f64, Vec<f64>) {
    let size: Vec<usize> = (0..n_labels)
        .map(|c| labels.iter().filter(|&&l| l == c).count())
        .collect();
    let mut per = vec![(0.0, 0usize); n_labels];
    let mut total = 0.0;
    for i in 0..n {
        let mut sums = vec![0.0; n_labels];
        for j in 0..n {
            if j != i {
                sums[labels[j]] += dist(i, j);
            }
        }
        let own = labels[i];
        let s = if size[own] <= 1 {
            0.0
        } else {
            let a = sums[own] / (size[own] - 1) as f64;
            let b = (0..n_labels)
                .filter(|&c| c != own && size[c] > 0)
                .map(|c| sums[c] / size[c] as f64)
                .fold(f64::INFINITY, f64::min);
            (b - a) / a.max(b)
        };
        total += s;
        per[own].0 += s;
        per[own].1 += 1;
    }
    (
        total / n as f64,
        per.iter()
            .map(|(s, c)| if *c > 0 { s / *c as f64 } else { f64::NAN })
            .collect(),
    )
}

fn main() -> Result<()> {
    let args = Args::parse();
    let assets = Assets::load()?;
    let filter = ParagraphParams::default();
    let encoder_params = EncoderParams::default();
    let tsne = TsneParams {
        perplexity: args.perplexity,
        theta: args.theta,
        max_iter: args.max_iter,
        seed: args.tsne_seed,
    };
    let inputs = assets.input_checksums([CORPUS, args.model.as_str()])?;
    let config = Config {
        args: &args,
        corpus: CORPUS,
        filter: filter.clone(),
        encoder: encoder_params.clone(),
        tsne,
        sampling: "paragraphs grouped by their article's topic; topics in name order; \
                   equal allocation (points / topics, the first points % topics topics get one more); \
                   rand::seq::index::sample with ChaCha8Rng::seed_from_u64(sample_seed), drawn topic by topic",
        inputs,
        program_sha256: workbench::results::executable_sha256()?,
    };
    let Some(exp) = Experiment::start(NAME, &config, args.force, SUMMARY_FILE)? else {
        return Ok(());
    };
    let out = &exp.out;

    // Paragraphs and their article's topic.
    let docs =
        wikipedia_corpus(&assets, CORPUS).with_context(|| format!("loading corpus `{CORPUS}`"))?;
    let topic_of: HashMap<&str, &str> = docs
        .iter()
        .map(|d| {
            (
                d.id.as_str(),
                d.meta.get("topic").map(String::as_str).unwrap_or(""),
            )
        })
        .collect();
    let passages = filter.clone().check()?.chunk_all(&docs)?;
    let mut by_topic: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, p) in passages.iter().enumerate() {
        let t = topic_of[p.doc_id.as_str()];
        if t.is_empty() {
            bail!("article `{}` has no topic label", p.doc_id);
        }
        by_topic.entry(t).or_default().push(i);
    }
    let topics: Vec<&str> = by_topic.keys().copied().collect();
    let nt = topics.len();
    if args.points < nt {
        bail!("--points {} is fewer than the {nt} topics", args.points);
    }
    let mut rng = ChaCha8Rng::seed_from_u64(args.sample_seed);
    let mut chosen: Vec<(usize, usize)> = Vec::new(); // (passage index, topic index)
    for (ti, t) in topics.iter().enumerate() {
        let pool = &by_topic[t];
        let quota = args.points / nt + usize::from(ti < args.points % nt);
        if quota > pool.len() {
            bail!(
                "topic `{t}` has {} paragraphs, fewer than its quota {quota}",
                pool.len()
            );
        }
        let mut idx: Vec<usize> = sample(&mut rng, pool.len(), quota)
            .into_iter()
            .map(|k| pool[k])
            .collect();
        idx.sort_unstable();
        chosen.extend(idx.into_iter().map(|i| (i, ti)));
    }
    let sample_passages: Vec<workbench::Passage> =
        chosen.iter().map(|&(i, _)| passages[i].clone()).collect();
    let labels: Vec<usize> = chosen.iter().map(|&(_, t)| t).collect();
    let n = sample_passages.len();
    println!(
        "{CORPUS}: {} articles, {} paragraphs kept by the filter, {n} sampled over {nt} topics",
        docs.len(),
        passages.len()
    );

    // Embeddings (cached) and t-SNE.
    let encoder = Arc::new(BertEncoder::load(&assets, &args.model, encoder_params)?);
    let cache = EmbeddingCache::project_default()?;
    let t0 = Instant::now();
    let (vectors, status) = cache.get_or_compute_with_status(&encoder, &sample_passages)?;
    let embed_s = t0.elapsed().as_secs_f64();
    println!("embedded {n} paragraphs in {embed_s:.1} s (cache: {status:?})");
    let t0 = Instant::now();
    let xy = tsne_2d(&vectors, &tsne)?;
    let tsne_s = t0.elapsed().as_secs_f64();
    println!(
        "t-SNE ({} iterations, perplexity {}) in {tsne_s:.1} s",
        tsne.max_iter, tsne.perplexity
    );

    // Does the map cluster by topic?
    let cos_d = |i: usize, j: usize| 1.0 - dot(&vectors[i], &vectors[j]) as f64;
    let euc_d =
        |i: usize, j: usize| ((xy[i].0 - xy[j].0).powi(2) + (xy[i].1 - xy[j].1).powi(2)).sqrt();
    let k = args.knn;
    let nb2 = knn(n, k, euc_d);
    let nb384 = knn(n, k, cos_d);
    let (agree2, agree2_t) = agreement(&nb2, &labels, nt);
    let (agree384, agree384_t) = agreement(&nb384, &labels, nt);
    let sizes: Vec<usize> = (0..nt)
        .map(|c| labels.iter().filter(|&&l| l == c).count())
        .collect();
    let chance = sizes
        .iter()
        .map(|&s| (s * s.saturating_sub(1)) as f64)
        .sum::<f64>()
        / (n * (n - 1)) as f64;
    // Permutation test: shuffle the labels over the fixed neighbour graph.
    let mut perm_rng = ChaCha8Rng::seed_from_u64(args.sample_seed);
    let mut shuffled = labels.clone();
    let (mut ge2, mut ge384, mut perm_sum, mut perm_max) = (0usize, 0usize, 0.0, 0.0f64);
    for _ in 0..args.permutations {
        shuffled.shuffle(&mut perm_rng);
        let a2 = agreement(&nb2, &shuffled, nt).0;
        let a384 = agreement(&nb384, &shuffled, nt).0;
        ge2 += usize::from(a2 >= agree2);
        ge384 += usize::from(a384 >= agree384);
        perm_sum += a2;
        perm_max = perm_max.max(a2);
    }
    let p2 = (ge2 + 1) as f64 / (args.permutations + 1) as f64;
    let p384 = (ge384 + 1) as f64 / (args.permutations + 1) as f64;
    let (sil384, sil384_t) = silhouette(n, &labels, nt, cos_d);
    let (sil2, sil2_t) = silhouette(n, &labels, nt, euc_d);

    let mut clustering = Table::new(["measure", "space", "value", "chance", "ratio_to_chance", "p_permutation"]).caption(
        format!(
            "Topical clustering of {n} wiki-leads-en paragraphs ({nt} topics): k-NN topic agreement (k = {k}) \
             and silhouette of the topic labels. Chance = agreement of a random neighbour; p from {} label permutations.",
            args.permutations
        ),
    );
    clustering.push([
        format!("knn{k}_topic_agreement"),
        "t-SNE 2-D (euclidean)".into(),
        format!("{agree2:.3}"),
        format!("{chance:.3}"),
        format!("{:.2}", agree2 / chance),
        format!("{p2:.4}"),
    ])?;
    clustering.push([
        format!("knn{k}_topic_agreement"),
        "MiniLM 384-d (cosine)".into(),
        format!("{agree384:.3}"),
        format!("{chance:.3}"),
        format!("{:.2}", agree384 / chance),
        format!("{p384:.4}"),
    ])?;
    clustering.push([
        "silhouette_by_topic".into(),
        "MiniLM 384-d (cosine distance)".into(),
        format!("{sil384:.3}"),
        "0".into(),
        "–".into(),
        "–".into(),
    ])?;
    clustering.push([
        "silhouette_by_topic".into(),
        "t-SNE 2-D (euclidean)".into(),
        format!("{sil2:.3}"),
        "0".into(),
        "–".into(),
        "–".into(),
    ])?;
    let mut per_topic = Table::new([
        "topic",
        "points",
        "knn_agreement_2d",
        "knn_agreement_384d",
        "silhouette_2d",
        "silhouette_384d",
    ]);
    for (c, t) in topics.iter().enumerate() {
        per_topic.push([
            t.to_string(),
            sizes[c].to_string(),
            format!("{:.3}", agree2_t[c]),
            format!("{:.3}", agree384_t[c]),
            format!("{:.3}", sil2_t[c]),
            format!("{:.3}", sil384_t[c]),
        ])?;
    }

    let mut points = Table::new(["id", "title", "topic", "x", "y"]);
    for (i, p) in sample_passages.iter().enumerate() {
        points.push([
            p.id.clone(),
            p.title.clone(),
            topics[labels[i]].to_string(),
            format!("{:.4}", xy[i].0),
            format!("{:.4}", xy[i].1),
        ])?;
    }
    let scatter = Scatter {
        title: format!(
            "Figure 2: t-SNE of {n} paragraph embeddings by topic ({k}-NN topic agreement {agree2:.2}, chance {chance:.2})"
        ),
        x_label: "t-SNE 1".into(),
        y_label: "t-SNE 2".into(),
        points: xy.iter().zip(&labels).map(|(&(x, y), &c)| (x, y, c)).collect(),
        categories: topics.iter().map(|t| t.to_string()).collect(),
        size: (1400, 860),
    };
    render(&scatter)?.save(out.out_dir(), "fig2")?;
    points.write_csv(&out.path("points.csv"))?;
    clustering.write_csv(&out.path("clustering.csv"))?;
    per_topic.write_csv(&out.path("per_topic.csv"))?;
    let md = format!(
        "{}\n\n{}\n{}\n",
        clustering.caption.as_deref().unwrap_or(""),
        clustering.to_markdown(),
        per_topic.to_markdown()
    );
    std::fs::write(out.path("clustering.md"), &md)?;
    let summary = serde_json::json!({
        "points": n,
        "topics": nt,
        "paragraphs_in_corpus": passages.len(),
        "knn_k": k,
        "knn_agreement_2d": agree2,
        "knn_agreement_384d": agree384,
        "chance_agreement": chance,
        "permutation_mean_2d": perm_sum / args.permutations.max(1) as f64,
        "permutation_max_2d": perm_max,
        "p_permutation_2d": p2,
        "p_permutation_384d": p384,
        "silhouette_384d_cosine": sil384,
        "silhouette_2d": sil2,
        "embed_seconds": embed_s,
        "tsne_seconds": tsne_s,
        "total_seconds": exp.elapsed_seconds(),
    });
    println!("{md}");
    exp.finish(summary)?;
    Ok(())
}
