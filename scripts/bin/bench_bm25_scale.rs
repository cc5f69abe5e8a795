//! Benchmark: BM25 from thousands to millions of passages. At each corpus size, the
//! workbench's `Bm25`, tantivy (block-max WAND), bm25s (numba) and Lucene
//! (`IndexSearcher.search` on one thread) index the same passages and search the same short
//! questions at depths 10 and 1000: index build time (wall and CPU seconds), index size,
//! queries per second and per CPU-second, and each system's top-10 overlap with the
//! workbench's. Before timing, the workbench's pruned search is checked to return exactly
//! (ids and score bits) the hits of exhaustive scoring, for every query at every depth.
//!
//! ```text
//! cargo run --release --features tantivy --bin bench_bm25_scale \
//!     [-- --sizes 5000,20000,100000,300000,1000000 --queries 1000 --ks 10,1000 --repeats 5]
//! ```
//!
//! Corpus (`--corpus offline`, the default): every passage of real text the workbench holds
//! offline, in this order: the MS MARCO DL19 subset (5,000 passages, whole), then the
//! Wikipedia sample dump, the Wikipedia leads, WikiText-2, RAG Mini Wikipedia and the SQuAD
//! 2.0 dev-half paragraphs, cut into 100-word windows (no overlap). A size larger than that
//! pool is filled with *resampled* passages: each takes the word count of a real passage
//! drawn at random and is filled with sentences drawn at random (with replacement) from the
//! pool, the last one cut at that count; none repeats a real or another resampled passage
//! (seeded, `--seed`). Resampled text adds no new words: its vocabulary stops growing, so
//! every term's document frequency grows with the corpus and rare terms vanish, where a
//! real corpus of that size keeps adding rare terms; and it has no order (no runs of
//! related passages). The record says, for every size, how many passages are real. Every
//! passage id starts with its position in the corpus (zero-padded), so that the workbench,
//! which breaks score ties by id, orders tied passages as Lucene and tantivy do (by index
//! order).
//!
//! `--corpus msmarco-passage`: the first N passages of MS MARCO's 8.8 million (asset
//! `msmarco-passage-corpus`, BEIR's `corpus.jsonl.gz` on the hub; online only, about 1 GB),
//! all real.
//!
//! Queries: the 50 MS MARCO DL19 queries and a seeded sample of NQ-open dev questions,
//! `--queries` in all: short natural questions, not passage sentences.
//!
//! Scoring: Lucene's BM25 at tantivy's fixed constants k1 = 1.2, b = 0.75 on every system;
//! the same tokens everywhere (lowercase runs of letters and digits, no stopwords, no
//! stemming; see `bench_bm25`). One search thread per system. Per system, size and depth:
//! one untimed pass (Lucene: `--warmup` passes and at least `--warmup-seconds` of them, for
//! the JIT), then `--repeats` timed passes; the table gives the median pass's queries per
//! second and all passes' queries over their CPU-seconds, each with its range over passes. CPU-seconds are the process's for the
//! workbench, tantivy and bm25s, and the searching thread's for Lucene (its GC and JIT
//! threads left out, in Lucene's favour; the whole JVM's are in `peers_<size>.json`). Only
//! the search is timed: tantivy's passage ids are looked up after the timing, while the
//! workbench's hits carry their ids (as its API returns them). Every system builds its index
//! on one thread. Top-10 overlap with the workbench is reported at every depth (the top 10
//! of the depth-k search). What each system's timing holds:
//! the workbench, tantivy and bm25s analyse each query inside the timed pass; the Lucene
//! harness builds its queries before timing (`scripts/java/LuceneSearchBench.java`).
//!
//! Writes `data/results/bench-bm25-scale/`: `bench.md`, `bench.csv`, `manifest.json` (its
//! `summary`: every pass's wall and CPU seconds), `peers_<size>.json` (the peer script's
//! output) and the figures `qps_cpu_k<k>.png/.svg` (queries per CPU-second against corpus
//! size, log–log).

use anyhow::{bail, ensure, Context, Result};
use clap::Parser;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use std::collections::{BTreeMap, HashSet};
use std::ffi::OsString;
use std::io::Write;
use std::path::Path;
use std::time::Instant;
use workbench::assets::Assets;
use workbench::bench::{median, process_cpu_seconds, BenchRun, PythonPeers};
use workbench::chunk::{Chunker, SlidingWindowParams, WholeDocument};
use workbench::display::Table;
use workbench::load::question_set::BadRecords;
use workbench::load::{self, beir, nq_open, rag_mini, squad};
use workbench::machine::load_average_1min;
use workbench::plot::{render, Line, Lines, LogY};
use workbench::retrieve::analyzer::{Analyzer, AnalyzerParams};
use workbench::retrieve::bm25::{Bm25, Bm25Params, Bm25Variant};
use workbench::retrieve::impact::Scratch;
use workbench::Passage;

const NAME: &str = "bench-bm25-scale";
const PEER: &str = "bench_bm25_scale_peers.py";
/// tantivy's BM25 constants, used by every system here.
const K1: f32 = 1.2;
const B: f32 = 0.75;
/// Window of the long real texts (words; no overlap).
const WINDOW: usize = 100;

#[cfg(feature = "tantivy")]
#[path = "bench_bm25/tantivy_peer.rs"]
mod tantivy_peer;

/// Where the passages come from.
#[derive(clap::ValueEnum, Serialize, Debug, Clone, Copy, PartialEq)]
#[serde(rename_all = "kebab-case")]
enum CorpusSource {
    /// The real text of the offline assets, resampled beyond it.
    Offline,
    /// MS MARCO's 8.8 million passages (asset `msmarco-passage-corpus`, online only), the
    /// first N of the file.
    MsmarcoPassage,
}

#[derive(Parser, Serialize, Debug)]
#[command(
    about = "BM25 at corpus sizes from thousands to millions of passages: the workbench, tantivy, bm25s and Lucene"
)]
struct Args {
    /// Corpus sizes (passages), comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [5_000usize, 20_000, 100_000, 300_000, 1_000_000])]
    sizes: Vec<usize>,
    /// Passages: `offline` (real offline text, resampled beyond it) or `msmarco-passage`
    /// (MS MARCO's collection, downloaded once: about 1 GB).
    #[arg(long, value_enum, default_value = "offline")]
    corpus: CorpusSource,
    /// Queries: the 50 DL19 queries plus NQ-open dev questions up to this many.
    #[arg(long, default_value_t = 1000)]
    queries: usize,
    /// Retrieval depths, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [10usize, 1000])]
    ks: Vec<usize>,
    /// Timed passes over all queries per system, size and depth.
    #[arg(long, default_value_t = 5)]
    repeats: usize,
    /// Untimed passes before Lucene's timed ones (the JIT).
    #[arg(long, default_value_t = 20)]
    warmup: usize,
    /// Lucene's warm-up goes on until at least this many seconds have passed.
    #[arg(long, default_value_t = 10.0)]
    warmup_seconds: f64,
    /// Seed of the question sample and of the resampled passages.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Systems, comma-separated: workbench, tantivy, bm25s, lucene.
    #[arg(long, value_delimiter = ',', default_values_t = ["workbench".to_string(), "tantivy".into(), "bm25s".into(), "lucene".into()])]
    systems: Vec<String>,
    /// Python of the peers venv (default: `$PEERS_VENV/bin/python`).
    #[arg(long, env = "PEERS_PYTHON")]
    #[serde(skip)]
    python: Option<std::path::PathBuf>,
}

/// Query id → passage ids, best first.
type TopLists = BTreeMap<String, Vec<String>>;
/// Depth → rates.
type DepthRates = BTreeMap<String, Rates>;
/// Passage count per source, in order.
type SourceCounts = Vec<(String, usize)>;

/// All systems at one corpus size.
struct SizeRun {
    n: usize,
    systems: Vec<SystemRun>,
    /// System → depth → top-10 overlap with the workbench.
    overlaps: BTreeMap<String, BTreeMap<String, f64>>,
    loads: Vec<f64>,
}

/// One system's numbers at one corpus size.
#[derive(Serialize, serde::Deserialize, Clone, Debug)]
struct SystemRun {
    name: String,
    system: String,
    index_s: f64,
    index_cpu_s: f64,
    index_bytes: u64,
    /// Depth → rates.
    depths: DepthRates,
    /// Depth → the top 10 of that depth's search.
    #[serde(default)]
    top10: BTreeMap<String, TopLists>,
    #[serde(default)]
    loadavg_1min: Vec<f64>,
    /// Workbench only: depth → the queries on which the pruned search pruned (the rest
    /// scored every posting), each checked equal to exhaustive scoring.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pruned_queries: BTreeMap<String, usize>,
}

#[derive(Serialize, serde::Deserialize, Clone, Debug)]
struct Rates {
    qps: f64,
    qps_min: f64,
    qps_max: f64,
    qps_cpu: f64,
    /// Queries per CPU-second of the slowest and the fastest pass.
    qps_cpu_min: f64,
    qps_cpu_max: f64,
    pass_seconds: Vec<f64>,
    pass_cpu_seconds: Vec<f64>,
}

#[derive(serde::Deserialize)]
struct PeersOut {
    num_passages: usize,
    num_queries: usize,
    systems: Vec<SystemRun>,
}

/// The offline pool of real passages, in the documented order, with the count per source.
fn real_pool(assets: &Assets) -> Result<(Vec<Passage>, SourceCounts)> {
    let windows = SlidingWindowParams::default()
        .window(WINDOW)
        .overlap(0)
        .check()?;
    let mut sources: Vec<(String, Vec<Passage>)> = Vec::new();
    let dl19 = beir::load(&assets.resolve_all("msmarco-dl19-subset")?, "test")?;
    sources.push((
        "msmarco-dl19-subset".into(),
        WholeDocument.chunk_all(&dl19.corpus)?,
    ));
    for name in load::WIKIPEDIA_CORPORA {
        let docs = load::wikipedia_corpus(assets, name)?;
        sources.push((name.to_string(), windows.chunk_all(&docs)?));
    }
    let (rag, _) = rag_mini::load_csv(
        &assets.resolve("rag-mini-wikipedia", "infos.csv")?,
        &assets.resolve("rag-mini-wikipedia", "questions.csv")?,
    )?;
    sources.push(("rag-mini-wikipedia".into(), windows.chunk_all(&rag)?));
    let sq = squad::load(&assets.resolve("squad-v2-dev-half", "dev-v2.0.json")?)?;
    sources.push(("squad-v2-dev-half".into(), windows.chunk_all(&sq.contexts)?));
    let mut pool = Vec::new();
    let mut counts = Vec::new();
    for (name, passages) in sources {
        counts.push((name.clone(), passages.len()));
        pool.extend(passages.into_iter().map(|p| Passage {
            id: format!("{name}:{}", p.id),
            title: String::new(),
            ..p
        }));
    }
    let mut seen = HashSet::new();
    for p in &pool {
        ensure!(seen.insert(p.id.as_str()), "passage id `{}` repeats", p.id);
    }
    Ok((pool, counts))
}

/// The MS MARCO corpus asset.
const MSMARCO: &str = "msmarco-passage-corpus";

/// The first `n` passages of a gzip-compressed BEIR corpus (`_id`, optional `title`,
/// `text`), in file order; the title, when not empty, is prefixed to the text. A bad line
/// is an error naming the file and line; fewer than `n` passages is an error.
fn beir_gz_prefix(path: &Path, n: usize) -> Result<Vec<Passage>> {
    use std::io::BufRead;
    #[derive(serde::Deserialize)]
    struct Rec {
        #[serde(rename = "_id")]
        id: String,
        #[serde(default)]
        title: Option<String>,
        text: String,
    }
    let f = std::fs::File::open(path).with_context(|| format!("{}", path.display()))?;
    let reader = std::io::BufReader::new(flate2::read::MultiGzDecoder::new(f));
    let mut out = Vec::with_capacity(n);
    for (i, line) in reader.lines().enumerate() {
        if out.len() == n {
            break;
        }
        let line = line.with_context(|| format!("{}:{}: reading", path.display(), i + 1))?;
        if line.trim().is_empty() {
            continue;
        }
        let r: Rec = serde_json::from_str(&line)
            .with_context(|| format!("{}:{}: not a BEIR corpus record", path.display(), i + 1))?;
        let text = match r.title.as_deref().map(str::trim) {
            Some(t) if !t.is_empty() => format!("{t} {}", r.text),
            _ => r.text,
        };
        out.push(Passage {
            id: format!("msmarco:{}", r.id),
            doc_id: r.id,
            title: String::new(),
            start: 0,
            end: text.len(),
            text,
        });
    }
    ensure!(
        out.len() == n,
        "{} holds {} passages, fewer than the {n} asked for",
        path.display(),
        out.len()
    );
    Ok(out)
}

/// Sentences of `text`: up to and including a `.`, `!` or `?` followed by whitespace.
fn sentences(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if matches!(c, '.' | '!' | '?') && chars.peek().is_some_and(|&(_, n)| n.is_whitespace()) {
            let s = text[start..i + 1].trim();
            if !s.is_empty() {
                out.push(s);
            }
            start = i + 1;
        }
    }
    let rest = text[start..].trim();
    if !rest.is_empty() {
        out.push(rest);
    }
    out
}

/// `n` resampled passages (see the module docs), seeded: each has the word count of a
/// real passage drawn at random, filled with sentences drawn at random (the last one cut at
/// that count), and differs from every real and every other resampled passage.
fn resampled(pool: &[Passage], n: usize, seed: u64) -> Result<Vec<Passage>> {
    let sents: Vec<(&str, usize)> = pool
        .iter()
        .flat_map(|p| sentences(&p.text))
        // Sentences without a letter or digit ("—", "*") would make token-less passages.
        .filter(|s| s.chars().any(char::is_alphanumeric))
        .map(|s| (s, s.split_whitespace().count()))
        .collect();
    ensure!(!sents.is_empty(), "the real pool has no sentences");
    let lens: Vec<usize> = pool
        .iter()
        .map(|p| p.text.split_whitespace().count().max(1))
        .collect();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let hash = |t: &str| {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        t.hash(&mut h);
        h.finish()
    };
    // No resampled passage repeats a real one or another resampled one.
    let mut seen: HashSet<u64> = pool.iter().map(|p| hash(&p.text)).collect();
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let mut text = String::new();
        for attempt in 0.. {
            ensure!(
                attempt < 1000,
                "could not draw a new passage after 1000 attempts ({i} drawn)"
            );
            let target = lens[rng.gen_range(0..lens.len())];
            let mut words: Vec<&str> = Vec::with_capacity(target);
            while words.len() < target {
                let (s, _) = sents[rng.gen_range(0..sents.len())];
                // The last sentence is cut where the drawn length is reached.
                words.extend(s.split_whitespace().take(target - words.len()));
            }
            text = words.join(" ");
            if text.chars().any(char::is_alphanumeric) && seen.insert(hash(&text)) {
                break;
            }
        }
        out.push(Passage {
            id: format!("resampled:{i}"),
            doc_id: format!("resampled:{i}"),
            title: String::new(),
            start: 0,
            end: text.len(),
            text,
        });
    }
    Ok(out)
}

/// The DL19 queries and a seeded sample of NQ-open dev questions, `n` in all.
fn questions(assets: &Assets, n: usize, seed: u64) -> Result<Vec<(String, String)>> {
    let dl19 = beir::load(&assets.resolve_all("msmarco-dl19-subset")?, "test")?;
    let mut out: Vec<(String, String)> = dl19
        .queries
        .iter()
        .map(|q| (format!("dl19:{}", q.id), q.text.clone()))
        .collect();
    ensure!(
        n >= out.len(),
        "--queries {n}: at least the {} DL19 queries",
        out.len()
    );
    let nq = nq_open::load(
        &assets.resolve("nq-open", "NQ-open.dev.jsonl")?,
        BadRecords::Skip,
    )?; // only the questions are used
    let mut picks: Vec<usize> = (0..nq.questions.len()).collect();
    picks.shuffle(&mut ChaCha8Rng::seed_from_u64(seed));
    let want = n - out.len();
    ensure!(
        want <= picks.len(),
        "--queries {n}: NQ-open dev has {} questions",
        picks.len()
    );
    out.extend(
        picks[..want]
            .iter()
            .map(|&i| (format!("nq:{i}"), nq.questions[i].question.clone())),
    );
    Ok(out)
}

fn write_jsonl(path: &Path, rows: impl Iterator<Item = serde_json::Value>) -> Result<()> {
    let f = std::fs::File::create(path).with_context(|| format!("{}", path.display()))?;
    let mut w = std::io::BufWriter::new(f);
    for r in rows {
        writeln!(w, "{r}")?;
    }
    w.flush()?;
    Ok(())
}

/// Rates from per-pass wall and CPU seconds: medians and ranges over passes, and queries
/// per CPU-second over all passes.
fn rates(n: usize, secs: Vec<f64>, cpus: Vec<f64>) -> Rates {
    let rate = |s: f64| n as f64 / s;
    let lo = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
    Rates {
        qps: rate(median(&secs)),
        qps_min: rate(hi(&secs)),
        qps_max: rate(lo(&secs)),
        qps_cpu: (n * secs.len()) as f64 / cpus.iter().sum::<f64>(),
        qps_cpu_min: rate(hi(&cpus)),
        qps_cpu_max: rate(lo(&cpus)),
        pass_seconds: secs,
        pass_cpu_seconds: cpus,
    }
}

/// Time `search` over every query at each depth: one untimed pass, then `repeats` passes.
/// Only `search` is timed; `ids` turns its result into passage ids, after the untimed pass.
/// Returns the rates per depth and, per depth, the top-10 ids of the untimed pass.
fn time_search<R>(
    queries: &[(String, String)],
    ks: &[usize],
    repeats: usize,
    mut search: impl FnMut(&str, usize) -> Result<R>,
    ids: impl Fn(R) -> Vec<String>,
) -> Result<(DepthRates, BTreeMap<String, TopLists>)> {
    let (mut depths, mut top10) = (BTreeMap::new(), BTreeMap::new());
    for &k in ks {
        let mut top = TopLists::new();
        for (id, q) in queries {
            let hits = search(q, k)?;
            top.insert(id.clone(), ids(hits).into_iter().take(10).collect());
        }
        let (mut secs, mut cpus) = (Vec::new(), Vec::new());
        for _ in 0..repeats {
            let c0 = process_cpu_seconds();
            let t0 = Instant::now();
            for (_, q) in queries {
                std::hint::black_box(search(q, k)?);
            }
            secs.push(t0.elapsed().as_secs_f64());
            cpus.push(process_cpu_seconds() - c0);
        }
        depths.insert(k.to_string(), rates(queries.len(), secs, cpus));
        top10.insert(k.to_string(), top);
    }
    Ok((depths, top10))
}

/// The workbench's queries per CPU-second over the faster of tantivy and Lucene at depth
/// `k`; `None` when neither ran.
fn ratio_to_fastest_engine(systems: &[SystemRun], k: &str) -> Option<f64> {
    let ours = systems.iter().find(|s| s.system == "workbench")?;
    let fastest = systems
        .iter()
        .filter(|s| s.system == "tantivy" || s.system == "lucene")
        .map(|s| s.depths.get(k).map_or(f64::NAN, |r| r.qps_cpu))
        .fold(f64::NAN, f64::max);
    let r = ours.depths.get(k)?.qps_cpu / fastest;
    r.is_finite().then_some(r)
}

fn run_workbench(
    passages: &[Passage],
    analyzer: &Analyzer,
    queries: &[(String, String)],
    args: &Args,
    tmp: &Path,
) -> Result<SystemRun> {
    // One thread, as every other system builds its index (the library's build is parallel).
    let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build()?;
    let (c0, t0) = (process_cpu_seconds(), Instant::now());
    let bm25 = pool.install(|| {
        Bm25::build(
            passages,
            analyzer,
            Bm25Params::new().k1(K1).b(B).variant(Bm25Variant::Lucene),
        )
    })?;
    let (index_s, index_cpu_s) = (t0.elapsed().as_secs_f64(), process_cpu_seconds() - c0);
    let file = tmp.join("workbench.index");
    bm25.index().save(&file)?;
    let index_bytes = std::fs::metadata(&file)?.len();
    std::fs::remove_file(&file)?;
    let mut scratch = Scratch::new();
    // Before timing: at every depth, the pruned search returns exactly (ids and score bits)
    // the hits of exhaustive scoring, so its rate is the rate of the exact top k.
    let mut exhaustive = Scratch::new();
    let mut pruned_queries = BTreeMap::new();
    for &k in &args.ks {
        let mut pruned = 0;
        for (id, q) in queries {
            let hits = bm25.retrieve_with(q, k, &mut scratch)?;
            pruned += usize::from(scratch.last_search().candidates > 0);
            let want = bm25.retrieve_exhaustive(q, k, &mut exhaustive)?;
            let same = hits.len() == want.len()
                && hits
                    .iter()
                    .zip(&want)
                    .all(|(a, b)| a.id == b.id && a.score.to_bits() == b.score.to_bits());
            ensure!(
                same,
                "{} passages, k = {k}, query `{id}`: the pruned search differs from exhaustive scoring",
                passages.len()
            );
        }
        eprintln!(
            "{} passages, k = {k}: pruned search equal to exhaustive scoring on all {} queries; it pruned on {pruned}",
            passages.len(),
            queries.len()
        );
        pruned_queries.insert(k.to_string(), pruned);
    }
    let (depths, top10) = time_search(
        queries,
        &args.ks,
        args.repeats,
        |q, k| Ok(bm25.retrieve_with(q, k, &mut scratch)?),
        |hits| {
            hits.into_iter()
                .filter(|h| h.score > 0.0)
                .map(|h| h.id)
                .collect()
        },
    )?;
    Ok(SystemRun {
        name: "workbench Bm25 (pruned search, 1 thread)".into(),
        system: "workbench".into(),
        index_s,
        index_cpu_s,
        index_bytes,
        depths,
        top10,
        loadavg_1min: vec![],
        pruned_queries,
    })
}

#[cfg(feature = "tantivy")]
fn run_tantivy(
    passages: &[Passage],
    analyzer: &Analyzer,
    queries: &[(String, String)],
    args: &Args,
) -> Result<Option<SystemRun>> {
    use tantivy_peer::TantivyBm25;
    ensure!(
        (tantivy_peer::K1, tantivy_peer::B) == (K1, B),
        "tantivy's constants changed"
    );
    let (c0, t0) = (process_cpu_seconds(), Instant::now());
    let docs: Vec<String> = passages
        .iter()
        .map(|p| analyzer.analyze(&p.text).join(" "))
        .collect();
    let tv = TantivyBm25::build(&docs)?;
    drop(docs);
    let (index_s, index_cpu_s) = (t0.elapsed().as_secs_f64(), process_cpu_seconds() - c0);
    let index_bytes = tv.index_bytes()?;
    let (depths, top10) = time_search(
        queries,
        &args.ks,
        args.repeats,
        |q, k| tv.search(&analyzer.analyze(q), k),
        |hits| {
            hits.into_iter()
                .map(|(d, _)| passages[d as usize].id.clone())
                .collect()
        },
    )?;
    Ok(Some(SystemRun {
        name: "tantivy 0.27 (block-max WAND, one segment, 1 thread)".into(),
        system: "tantivy".into(),
        index_s,
        index_cpu_s,
        index_bytes,
        depths,
        top10,
        loadavg_1min: vec![],
        pruned_queries: BTreeMap::new(),
    }))
}

#[cfg(not(feature = "tantivy"))]
fn run_tantivy(
    _: &[Passage],
    _: &Analyzer,
    _: &[(String, String)],
    _: &Args,
) -> Result<Option<SystemRun>> {
    eprintln!("tantivy peer not compiled in: build with `--features tantivy` (scripts/bench does)");
    Ok(None)
}

/// Mean over queries of |a ∩ b| / max(|a|, |b|) (queries where both are empty left out).
fn overlap(a: &TopLists, b: &TopLists, who: &str) -> Result<f64> {
    let mut sum = (0.0, 0usize);
    for (q, xs) in a {
        let ys: HashSet<&String> = b
            .get(q)
            .with_context(|| format!("{who} returned nothing for query `{q}`"))?
            .iter()
            .collect();
        let d = xs.len().max(ys.len());
        if d > 0 {
            sum.0 += xs.iter().filter(|x| ys.contains(x)).count() as f64 / d as f64;
            sum.1 += 1;
        }
    }
    Ok(sum.0 / sum.1.max(1) as f64)
}

fn mb(bytes: u64) -> String {
    format!("{:.1}", bytes as f64 / 1e6)
}

fn main() -> Result<()> {
    let mut args = Args::parse();
    args.ks.sort_unstable();
    args.ks.dedup();
    ensure!(
        args.repeats >= 1
            && args.warmup >= 1
            && args.warmup_seconds >= 0.0
            && !args.ks.is_empty()
            && !args.sizes.is_empty(),
        "--repeats, --warmup, --ks and --sizes must be given and at least 1"
    );
    ensure!(
        args.ks.iter().all(|&k| k >= 1),
        "--ks: depths of at least 1"
    );
    for s in &args.systems {
        ensure!(
            ["workbench", "tantivy", "bm25s", "lucene"].contains(&s.as_str()),
            "--systems: `{s}` is not one of workbench, tantivy, bm25s, lucene"
        );
    }
    ensure!(
        args.systems.iter().any(|s| s == "workbench"),
        "--systems must include workbench (every overlap is against it)"
    );
    let want = |s: &str| args.systems.iter().any(|x| x == s);
    let py_systems: Vec<&str> = ["bm25s", "lucene"]
        .into_iter()
        .filter(|s| want(s))
        .collect();
    let root = workbench::paths::project_root()?;
    let peers = PythonPeers::new(&root, args.python.clone());
    if !py_systems.is_empty() {
        peers.command(PEER)?; // a missing peers venv stops the run before any work
    }
    let mut sizes = args.sizes.clone();
    sizes.sort_unstable();
    sizes.dedup();

    let assets = Assets::load()?;
    let queries = questions(&assets, args.queries, args.seed)?;
    let largest = *sizes.last().context("no size")?;
    let (pool, counts) = match args.corpus {
        CorpusSource::Offline => real_pool(&assets)?,
        CorpusSource::MsmarcoPassage => {
            let path = assets.resolve(MSMARCO, "corpus.jsonl.gz")?;
            eprintln!("reading the first {largest} passages of {}", path.display());
            (
                beir_gz_prefix(&path, largest)?,
                vec![(MSMARCO.to_string(), largest)],
            )
        }
    };
    // A passage without a token matches nothing, and Lucene leaves it out of its index.
    let analyzer = AnalyzerParams::plain().build()?;
    let before = pool.len();
    let pool: Vec<Passage> = pool
        .into_iter()
        .filter(|p| !analyzer.analyze(&p.text).is_empty())
        .collect();
    if pool.len() < before {
        eprintln!("left out {} passages without a token", before - pool.len());
    }
    let mut corpus = pool.clone();
    if largest > pool.len() {
        eprintln!(
            "resampling {} passages beyond the {} real ones",
            largest - pool.len(),
            pool.len()
        );
        corpus.extend(resampled(&pool, largest - pool.len(), args.seed)?);
    }
    corpus.truncate(largest);
    // Ids whose string order is corpus order: the workbench breaks score ties by id, Lucene
    // and tantivy by index order, so that all three order tied passages alike.
    for (i, p) in corpus.iter_mut().enumerate() {
        p.id = format!("{i:08}:{}", p.id);
    }

    let BenchRun { exp, machine } = BenchRun::start(NAME, &args, "bench.md")?;
    let out = &exp.out;
    println!("{}", machine.summary());
    let work = out.path("work");
    std::fs::create_dir_all(&work)?;
    let qpath = out.path("queries.jsonl");
    write_jsonl(
        &qpath,
        queries
            .iter()
            .map(|(i, t)| serde_json::json!({"_id": i, "text": t})),
    )?;
    let ks: Vec<String> = args.ks.iter().map(|k| k.to_string()).collect();

    let mut runs: Vec<SizeRun> = Vec::new();
    for &n in &sizes {
        let passages = &corpus[..n];
        let real = n.min(pool.len());
        eprintln!("== {n} passages ({real} real)");
        let mut loads = vec![load_average_1min()];
        let mut systems = vec![run_workbench(passages, &analyzer, &queries, &args, &work)?];
        eprintln!("workbench done");
        if want("tantivy") {
            systems.extend(run_tantivy(passages, &analyzer, &queries, &args)?);
            eprintln!("tantivy done");
        }
        loads.push(load_average_1min());
        if !py_systems.is_empty() {
            let cpath = work.join("corpus.jsonl");
            write_jsonl(
                &cpath,
                passages
                    .iter()
                    .map(|p| serde_json::json!({"_id": p.id, "text": p.text})),
            )?;
            let argv: Vec<OsString> = vec![
                "--corpus".into(),
                cpath.clone().into(),
                "--queries".into(),
                qpath.clone().into(),
                "--k1".into(),
                K1.to_string().into(),
                "--b".into(),
                B.to_string().into(),
                "--ks".into(),
                ks.join(",").into(),
                "--repeats".into(),
                args.repeats.to_string().into(),
                "--warmup".into(),
                args.warmup.to_string().into(),
                "--warmup-seconds".into(),
                args.warmup_seconds.to_string().into(),
                "--systems".into(),
                py_systems.join(",").into(),
            ];
            let res = peers
                .run(PEER, argv)
                .with_context(|| format!("the peers at {n} passages"))?;
            std::fs::write(out.path(&format!("peers_{n}.json")), res.json_line()?)?;
            let parsed: PeersOut = res.json()?;
            ensure!(
                parsed.num_passages == n && parsed.num_queries == queries.len(),
                "the peers read {} passages and {} queries, not {n} and {}",
                parsed.num_passages,
                parsed.num_queries,
                queries.len()
            );
            std::fs::remove_file(&cpath)?;
            systems.extend(parsed.systems);
            loads.push(load_average_1min());
        }
        let ours = systems[0].top10.clone();
        let mut overlaps = BTreeMap::new();
        for s in &systems[1..] {
            let mut per_depth = BTreeMap::new();
            for k in &ks {
                let (a, b) = (ours.get(k), s.top10.get(k));
                let (Some(a), Some(b)) = (a, b) else {
                    bail!("{}: no top-10 lists at depth {k}", s.name);
                };
                per_depth.insert(k.clone(), overlap(a, b, &s.name)?);
            }
            overlaps.insert(s.system.clone(), per_depth);
        }
        for s in &systems {
            eprintln!(
                "{n}: {} — {}",
                s.name,
                ks.iter()
                    .map(|k| format!(
                        "k={k} {:.0} q/s, {:.0} q/CPU-s",
                        s.depths[k].qps, s.depths[k].qps_cpu
                    ))
                    .collect::<Vec<_>>()
                    .join("; ")
            );
        }
        runs.push(SizeRun {
            n,
            systems,
            overlaps,
            loads,
        });
    }
    std::fs::remove_dir_all(&work)?;

    // The table: one row per size and system.
    let mut head = vec![
        "passages".to_string(),
        "real passages".into(),
        "system".into(),
        "index build s".into(),
        "index build CPU-s".into(),
        "serialized index MB".into(),
    ];
    for k in &ks {
        head.push(format!("k={k}: q/s"));
        head.push(format!("k={k}: q/s range over passes"));
        head.push(format!("k={k}: q per CPU-s"));
        head.push(format!("k={k}: q per CPU-s range over passes"));
        head.push(format!("k={k}: top-10 overlap with workbench"));
    }
    for k in &ks {
        head.push(format!(
            "k={k}: workbench per CPU-s ÷ fastest of tantivy, Lucene"
        ));
    }
    let mut table = Table::new(head).caption(format!(
        "BM25 (Lucene idf, k1 = {K1}, b = {B}) at each corpus size: {} queries (50 MS MARCO DL19, the rest NQ-open dev questions), one search thread per system, the same tokens; {} timed passes per system, size and depth (q/s: the median pass, with the range over passes; q per CPU-s: all passes' queries over their CPU-seconds, with the range over passes); Lucene after at least {} warm-up passes and {} s; queries per CPU-second of the system's process (Lucene: its searching thread); the workbench's pruned hits equal exhaustive scoring's (ids and score bits) for every query at every size and depth, checked before timing in untimed passes of its own (the queries on which it pruned are in the manifest). {}",
        queries.len(),
        args.repeats,
        args.warmup,
        args.warmup_seconds,
        match args.corpus {
            CorpusSource::Offline => format!("Real offline text up to {} passages, resampled sentences of it beyond (see `bench_bm25_scale`).", pool.len()),
            CorpusSource::MsmarcoPassage => "The first passages of MS MARCO's collection (BEIR's corpus.jsonl.gz).".to_string(),
        }
    ));
    let mut summary_sizes = Vec::new();
    for SizeRun {
        n,
        systems,
        overlaps,
        loads,
    } in &runs
    {
        let ratios: BTreeMap<String, Option<f64>> = ks
            .iter()
            .map(|k| (k.clone(), ratio_to_fastest_engine(systems, k)))
            .collect();
        for (i, s) in systems.iter().enumerate() {
            let mut row = vec![
                n.to_string(),
                n.min(&pool.len()).to_string(),
                s.name.clone(),
                format!("{:.1}", s.index_s),
                format!("{:.1}", s.index_cpu_s),
                mb(s.index_bytes),
            ];
            for k in &ks {
                let r = &s.depths[k];
                row.push(format!("{:.0}", r.qps));
                row.push(format!("{:.0}–{:.0}", r.qps_min, r.qps_max));
                row.push(format!("{:.0}", r.qps_cpu));
                row.push(format!("{:.0}–{:.0}", r.qps_cpu_min, r.qps_cpu_max));
                row.push(match overlaps.get(&s.system) {
                    Some(o) => format!("{:.3}", o[k]),
                    None => "–".into(),
                });
            }
            for k in &ks {
                row.push(match ratios[k] {
                    Some(r) if i == 0 => format!("{r:.2}"),
                    _ => "–".into(),
                });
            }
            table.push(row)?;
        }
        summary_sizes.push(serde_json::json!({
            "passages": n,
            "real_passages": n.min(&pool.len()),
            "systems": systems.iter().map(|s| {
                let mut v = serde_json::to_value(s).unwrap_or_default();
                if let Some(o) = v.as_object_mut() { o.remove("top10"); }
                v
            }).collect::<Vec<_>>(),
            "top10_overlap_with_workbench": overlaps,
            "workbench_qps_cpu_over_fastest_of_tantivy_lucene": ratios,
            "loadavg_1min": loads,
        }));
    }
    table.write_csv(&out.path("bench.csv"))?;

    // Figures: queries per CPU-second against corpus size, one per depth.
    let mut names: Vec<(String, String)> = Vec::new();
    for s in &runs[0].systems {
        names.push((s.system.clone(), s.name.clone()));
    }
    for k in &ks {
        let lines = names
            .iter()
            .map(|(sys, label)| Line {
                label: label.clone(),
                points: runs
                    .iter()
                    .filter_map(|r| {
                        let n = &r.n;
                        r.systems
                            .iter()
                            .find(|s| &s.system == sys)
                            .map(|s| (*n as f64 / 1000.0, s.depths[k].qps_cpu))
                    })
                    .collect(),
            })
            .collect();
        let fig = render(&LogY(Lines {
            title: format!("BM25 top-{k}: queries per CPU-second against corpus size (one thread)"),
            // The CPU model and cores on the axis line; its instruction sets on a second
            // line (on one line the label runs past the figure's edge). The load is in the
            // record.
            x_label: format!(
                "passages in the index (thousands); {}\ninstruction sets: {}",
                machine.cpu(),
                machine.instruction_sets()
            ),
            y_label: "queries per CPU-second".into(),
            lines,
            log_x: true,
            y_range: None,
            size: (900, 560),
        }))?;
        fig.save(out.out_dir(), &format!("qps_cpu_k{k}"))?;
    }

    let md = format!(
        "{}\n\n{}\n\nReal passages per source: {}.\n",
        machine.summary(),
        table.to_markdown(),
        counts
            .iter()
            .map(|(s, c)| format!("{s} {c}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    std::fs::write(out.path("bench.md"), &md)?;
    exp.finish(serde_json::json!({
        "k1": K1, "b": B,
        "num_queries": queries.len(),
        "real_pool": pool.len(),
        "real_pool_sources": counts.iter().map(|(s, c)| (s.clone(), *c)).collect::<BTreeMap<_, _>>(),
        "sizes": summary_sizes,
        "loadavg_1min": runs.iter().flat_map(|r| r.loads.iter().copied()).collect::<Vec<_>>(),
    }))?;
    println!("{md}");
    if runs.iter().any(|r| r.systems.len() < args.systems.len()) {
        bail!("some systems did not run (see above): the table is incomplete");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn passage(id: &str, text: &str) -> Passage {
        Passage {
            id: id.into(),
            doc_id: id.into(),
            title: String::new(),
            text: text.into(),
            start: 0,
            end: text.len(),
        }
    }

    #[test]
    fn sentences_end_at_terminal_punctuation_before_whitespace() {
        assert_eq!(
            sentences("Dr.Who is 3.5 m tall. Really? Yes!  Trailing"),
            ["Dr.Who is 3.5 m tall.", "Really?", "Yes!", "Trailing"]
        );
        assert!(sentences("  ").is_empty());
    }

    #[test]
    fn resampled_passages_are_seeded_and_reach_a_real_length() {
        let pool = [
            passage("a", "One two three. Four five. Six seven."),
            passage("b", "Eight nine ten eleven. Twelve thirteen fourteen."),
        ];
        let a = resampled(&pool, 30, 7).unwrap();
        assert_eq!(a, resampled(&pool, 30, 7).unwrap());
        assert_ne!(a, resampled(&pool, 30, 8).unwrap());
        let allowed = [
            "One two three.",
            "Four five.",
            "Six seven.",
            "Eight nine ten eleven.",
            "Twelve thirteen fourteen.",
        ];
        let mut texts = HashSet::new();
        for p in &a {
            // Exactly a real passage's word count: 7.
            assert_eq!(p.text.split_whitespace().count(), 7, "{p:?}");
            // Made of pool sentences, the last one possibly cut.
            let mut rest = p.text.as_str();
            while !rest.is_empty() {
                match allowed.iter().find(|s| rest.starts_with(*s)) {
                    Some(s) => rest = rest[s.len()..].trim_start(),
                    None => {
                        assert!(allowed.iter().any(|s| s.starts_with(rest)), "{p:?}");
                        break;
                    }
                }
            }
            assert!(
                !pool.iter().any(|r| r.text == p.text),
                "{p:?} repeats a real passage"
            );
            assert!(texts.insert(p.text.clone()), "{p:?} repeats");
        }
    }

    #[test]
    fn resampled_passages_always_hold_a_token() {
        // A one-word real passage and a sentence of punctuation only.
        let pool = [
            passage("a", "Alpha beta gamma. — Delta."),
            passage("b", "*"),
            passage("c", "Eta theta iota kappa. Lambda mu."),
        ];
        for p in resampled(&pool, 10, 3).unwrap() {
            assert!(p.text.chars().any(char::is_alphanumeric), "{p:?}");
        }
    }

    #[test]
    fn beir_gz_prefix_reads_the_first_n_and_names_bad_lines() {
        use std::io::Write as _;
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| {
            let p = dir.path().join(name);
            let mut gz = flate2::write::GzEncoder::new(
                std::fs::File::create(&p).unwrap(),
                flate2::Compression::fast(),
            );
            gz.write_all(text.as_bytes()).unwrap();
            gz.finish().unwrap();
            p
        };
        let ok = write(
            "ok.jsonl.gz",
            "{\"_id\": \"0\", \"title\": \"\", \"text\": \"a b\"}\n\n{\"_id\": \"1\", \"title\": \"T\", \"text\": \"c\"}\n{\"_id\": \"2\", \"text\": \"d\"}\n",
        );
        let two = beir_gz_prefix(&ok, 2).unwrap();
        assert_eq!(
            two.iter()
                .map(|p| (p.id.as_str(), p.text.as_str()))
                .collect::<Vec<_>>(),
            [("msmarco:0", "a b"), ("msmarco:1", "T c")]
        );
        let e = format!("{:#}", beir_gz_prefix(&ok, 4).unwrap_err());
        assert!(e.contains("holds 3 passages, fewer than the 4"), "{e}");
        let bad = write(
            "bad.jsonl.gz",
            "{\"_id\": \"0\", \"text\": \"a\"}\n{\"text\": \"b\"}\n",
        );
        let e = format!("{:#}", beir_gz_prefix(&bad, 2).unwrap_err());
        assert!(
            e.contains("bad.jsonl.gz:2: not a BEIR corpus record"),
            "{e}"
        );
    }

    #[test]
    fn rates_take_ranges_from_the_slowest_and_fastest_pass() {
        let r = rates(100, vec![1.0, 2.0, 4.0], vec![0.5, 1.0, 2.0]);
        assert_eq!((r.qps, r.qps_min, r.qps_max), (50.0, 25.0, 100.0));
        assert_eq!((r.qps_cpu_min, r.qps_cpu_max), (50.0, 200.0));
        assert!((r.qps_cpu - 300.0 / 3.5).abs() < 1e-9);
    }

    fn system(name: &str, qps_cpu: f64) -> SystemRun {
        let r = rates(10, vec![1.0], vec![10.0 / qps_cpu]);
        SystemRun {
            name: name.into(),
            system: name.into(),
            index_s: 0.0,
            index_cpu_s: 0.0,
            index_bytes: 0,
            depths: [("10".to_string(), r)].into(),
            top10: BTreeMap::new(),
            pruned_queries: BTreeMap::new(),
            loadavg_1min: vec![],
        }
    }

    #[test]
    fn the_ratio_is_against_the_faster_of_tantivy_and_lucene_only() {
        let mut s = vec![
            system("workbench", 1000.0),
            system("tantivy", 200.0),
            system("bm25s", 900.0),
            system("lucene", 400.0),
        ];
        let r = ratio_to_fastest_engine(&s, "10").unwrap();
        assert!((r - 2.5).abs() < 1e-9, "{r}");
        assert_eq!(ratio_to_fastest_engine(&s, "1000"), None);
        s.retain(|x| x.system != "lucene");
        assert!((ratio_to_fastest_engine(&s, "10").unwrap() - 5.0).abs() < 1e-9);
        s.retain(|x| x.system != "tantivy");
        assert_eq!(ratio_to_fastest_engine(&s, "10"), None);
    }

    #[test]
    fn overlap_needs_every_query_and_skips_empty_pairs() {
        let a: BTreeMap<String, Vec<String>> = [
            ("q1".to_string(), vec!["x".to_string(), "y".to_string()]),
            ("q2".to_string(), vec![]),
        ]
        .into();
        let mut b = a.clone();
        b.insert("q1".into(), vec!["x".into()]);
        assert_eq!(overlap(&a, &b, "p").unwrap(), 0.5);
        // Divided by the longer list, whichever side it is on.
        assert_eq!(overlap(&b, &a, "p").unwrap(), 0.5);
        b.remove("q2");
        assert!(overlap(&a, &b, "p").is_err());
    }
}
