//! Benchmark: queries per second of the retrieval server (`workbench::serve`, Search-R1's
//! `/retrieve` API over HTTP on the loopback interface) against the in-process call of the
//! same retriever, at batch 1 (one query per call or request) and at batch `--queries` (all
//! queries in one call or request), for each pipeline config given; the in-process call with
//! the server's work added but no HTTP (the request parsed, the passages' texts looked up, the
//! answer serialised and decoded), which splits the server's cost into JSON and transport;
//! and, with
//! `--search-r1 DIR`, Search-R1's own server (`search_r1/search/retrieval_server.py` of a
//! checkout of PeterGriffinJin/Search-R1) on the dense configs, over the same passages, the
//! same MiniLM vectors and the same queries.
//!
//! ```text
//! cargo run --release --bin bench_serve [-- --queries 512 --topk 3 --rounds 9 --search-r1 PATH/TO/Search-R1]
//! ```
//!
//! Protocol. Each config's first stage is built once (`workbench::pipeline::first_stage`); the
//! in-process side calls its `retrieve_all` (one query, or all of them), the HTTP side asks a
//! server over that same retriever object in this process, with one keep-alive client
//! (`ureq`) that sends Search-R1's request (`{"queries", "topk", "return_scores": true}`) and
//! decodes the whole answer. Both sides retrieve on the same rayon pool (the machine's cores).
//! Before timing, every system answers every query once (warm-up, untimed), and the HTTP
//! answers are checked to be the in-process ones (ids and score bits). Then `--rounds`
//! rounds: in each, every system in turn (the order rotated, and reversed every other round) runs passes
//! over the queries until `--min-secs` have passed; its rate in the round is queries / time.
//! The table gives the median over rounds and the range (min–max), and for each system its
//! ratio to the in-process call at the same batch within each round (both measured minutes
//! apart at most), as the median and range of those per-round ratios.
//!
//! Writes `data/results/bench-serve/`: `bench.md`, `bench.csv`, `config.json` (arguments, the
//! machine), `manifest.json`.

use anyhow::{bail, ensure, Context, Result};
use clap::Parser;
use serde::Serialize;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use workbench::bench::{median, BenchRun};
use workbench::display::Table;
use workbench::machine::load_average;
use workbench::pipeline::{first_stage, Pipeline, PipelineConfig};
use workbench::retrieve::http::ScoredResponse;
use workbench::retrieve::Retriever;
use workbench::serve::{ServeParams, Served, Server};
use workbench::Query;

#[path = "bench_serve/search_r1_peer.rs"]
mod search_r1_peer;

const NAME: &str = "bench-serve";
const SUMMARY_FILE: &str = "bench.md";
/// The label of the workbench's own server among the systems.
const WORKBENCH_SERVER: &str = "HTTP (workbench server)";

#[derive(Parser, Serialize, Debug)]
#[command(
    about = "Retrieval server queries/s over HTTP vs the in-process call (and Search-R1's server)"
)]
struct Args {
    /// Pipeline configs whose first stage is served (paths relative to the project root).
    #[arg(long, num_args = 1.., default_values = [
        "configs/report001_sparse.toml",
        "configs/report001_dense.toml",
        "configs/report001_hybrid.toml",
    ])]
    configs: Vec<PathBuf>,
    /// Queries: the config's questions in file order (repeated when there are fewer); also the
    /// large batch.
    #[arg(long, default_value_t = 512)]
    queries: usize,
    /// Hits per query (Search-R1's default, 3).
    #[arg(long, default_value_t = 3)]
    topk: usize,
    /// Rounds; the table gives the median and range over them.
    #[arg(long, default_value_t = 9)]
    rounds: usize,
    /// Seconds each system runs in each round (whole passes, at least one).
    #[arg(long, default_value_t = 1.0)]
    min_secs: f64,
    /// A checkout of PeterGriffinJin/Search-R1: its `retrieval_server.py` is the peer on the
    /// dense configs (run by `scripts/python/search_r1_server.py`).
    #[arg(long)]
    search_r1: Option<PathBuf>,
    /// Python with Search-R1's server dependencies (default: the peers venv's).
    #[arg(long, env = "PEERS_PYTHON")]
    python: Option<PathBuf>,
    /// Extra site-packages appended to the peer's `sys.path` (Search-R1's dependencies that the
    /// peers venv lacks: faiss-cpu, datasets, fastapi, uvicorn).
    #[arg(long, env = "SEARCH_R1_EXTRA_PACKAGES")]
    peer_packages: Option<PathBuf>,
}

/// One way of asking: the in-process call or a server.
enum Side {
    InProcess(Arc<dyn Retriever>),
    /// The server's work without HTTP: the request body parsed, answered and serialised by
    /// [`Served::answer`], the answer decoded as the HTTP client decodes it.
    Json {
        served: Arc<Served>,
        params: ServeParams,
    },
    Http {
        url: String,
        agent: ureq::Agent,
    },
}

impl Side {
    fn http(url: String) -> Side {
        Side::Http {
            url,
            agent: ureq::AgentBuilder::new()
                .timeout(Duration::from_secs(600))
                .build(),
        }
    }

    /// The ranked (id, score) lists of `queries`, in one call or request.
    fn ask(&self, queries: &[Query], k: usize) -> Result<Vec<Vec<(String, f32)>>> {
        match self {
            Side::InProcess(r) => {
                let mut run = r.retrieve_all(queries, k)?;
                Ok(queries
                    .iter()
                    .map(|q| {
                        run.remove(&q.id)
                            .unwrap_or_default()
                            .into_iter()
                            .map(|h| (h.id, h.score))
                            .collect()
                    })
                    .collect())
            }
            Side::Json { served, params } => {
                let body = serde_json::to_vec(&request_body(queries, k))?;
                let request = workbench::serve::parse_request(&body, params)
                    .map_err(|m| anyhow::anyhow!("the request was refused: {m}"))?;
                let answer = served.answer(&request)?;
                // Decoded as the HTTP side decodes a response body (through a reader).
                let parsed: ScoredResponse = serde_json::from_reader(answer.as_slice())
                    .context("decoding the in-process answer")?;
                hits(parsed, queries.len(), "the in-process answer")
            }
            Side::Http { url, agent } => {
                let response = agent
                    .post(url)
                    .send_json(request_body(queries, k))
                    .with_context(|| format!("POST {url}"))?;
                let parsed: ScoredResponse = serde_json::from_reader(response.into_reader())
                    .with_context(|| format!("the answer of {url}"))?;
                hits(parsed, queries.len(), url)
            }
        }
    }
}

/// Search-R1's request for `queries`.
fn request_body(queries: &[Query], k: usize) -> serde_json::Value {
    let texts: Vec<&str> = queries.iter().map(|q| q.text.as_str()).collect();
    serde_json::json!({"queries": texts, "topk": k, "return_scores": true})
}

/// The ranked (id, score) lists of a decoded answer, one per query.
fn hits(parsed: ScoredResponse, n: usize, from: &str) -> Result<Vec<Vec<(String, f32)>>> {
    ensure!(
        parsed.result.len() == n,
        "{from} answered {} lists for {n} queries",
        parsed.result.len(),
    );
    Ok(parsed
        .result
        .into_iter()
        .map(|l| {
            l.into_iter()
                .map(|d| (d.document.id, d.score as f32))
                .collect()
        })
        .collect())
}

struct System {
    label: String,
    side: Side,
    batch: usize,
    /// Queries per second, one per round.
    rates: Vec<f64>,
}

impl System {
    /// One pass over `queries` in calls of `self.batch`.
    fn pass(&self, queries: &[Query], k: usize) -> Result<Vec<Vec<(String, f32)>>> {
        let mut out = Vec::with_capacity(queries.len());
        for chunk in queries.chunks(self.batch) {
            out.extend(self.ask_checked(chunk, k)?);
        }
        Ok(out)
    }

    fn ask_checked(&self, chunk: &[Query], k: usize) -> Result<Vec<Vec<(String, f32)>>> {
        self.side
            .ask(chunk, k)
            .with_context(|| format!("{} (batch {})", self.label, self.batch))
    }
}

#[derive(Serialize)]
struct Config<'a> {
    args: &'a Args,
    program_sha256: String,
}

fn main() -> Result<()> {
    let args = Args::parse();
    ensure!(
        args.queries > 0 && args.topk > 0 && args.rounds > 0,
        "--queries, --topk and --rounds must be at least 1"
    );
    ensure!(
        args.min_secs.is_finite() && args.min_secs >= 0.0,
        "--min-secs must be a number of seconds"
    );
    let root = workbench::paths::project_root()?;
    let config = Config {
        args: &args,
        program_sha256: workbench::results::executable_sha256()?,
    };
    let BenchRun { exp, machine } = BenchRun::start(NAME, &config, SUMMARY_FILE)?;
    let out = &exp.out;
    let load_start = machine.load_before.clone();
    println!("{}", machine.summary());
    let threads = rayon::current_num_threads();

    let mut table = Table::new([
        "config",
        "retriever",
        "passages",
        "system",
        "batch",
        "queries/s (median)",
        "range over rounds",
        "÷ in-process (median of rounds)",
        "range of the ratio",
    ])
    .caption(format!(
        "Queries per second, top {} of {} queries (the config's questions in file order), median and range over {} \
         rounds of at least {} s per system (whole passes); batch 1: one query per call or request, batch {}: all in one. \
         The ratio: each round's rate over the in-process rate at the same batch in that round, median and range over rounds. \
         in-process + JSON: the server's request parsing, answer and serialisation and the client's decoding, without HTTP. \
         HTTP: the workbench's server (axum, {} tokio workers) over the same retriever object on the loopback \
         interface, one keep-alive client sending Search-R1's request and decoding the answer; retrieval on \
         rayon's {threads} threads on both sides.",
        args.topk,
        args.queries,
        args.rounds,
        args.min_secs,
        args.queries,
        ServeParams::default().worker_threads,
    ));
    // The same rows with plain numbers, for the records (`data/benchmarks.toml` reads them).
    let mut csv = Table::new([
        "config",
        "retriever",
        "passages",
        "system",
        "batch",
        "median qps",
        "min qps",
        "max qps",
        "ratio to in-process (median of per-round ratios)",
        "min ratio",
        "max ratio",
        "workbench server / this (median of per-round ratios)",
        "min workbench server / this",
        "max workbench server / this",
    ]);
    let mut notes = Vec::new();
    let mut sizes = std::collections::BTreeSet::new();
    // Both the server and the JSON side take a request of every query at once.
    let serve_params = ServeParams {
        log: false,
        max_queries: args.queries.max(ServeParams::default().max_queries),
        ..ServeParams::default()
    };
    let mut batches = vec![1, args.queries];
    batches.dedup();
    let mut summary = serde_json::Map::new();
    for path in &args.configs {
        let path = if path.is_absolute() {
            path.clone()
        } else {
            root.join(path)
        };
        let mut config = PipelineConfig::from_file(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        config.questions.limit = 0;
        let questions = Pipeline::load_questions_of(&config)?;
        ensure!(
            !questions.questions.is_empty(),
            "{}: no questions",
            path.display()
        );
        let queries: Vec<Query> = questions
            .questions
            .iter()
            .cycle()
            .take(args.queries)
            .enumerate()
            .map(|(i, q)| Query {
                id: format!("q{i}"),
                text: q.question.clone(),
            })
            .collect();
        let t0 = Instant::now();
        let stage = first_stage(&config).with_context(|| format!("building {}", path.display()))?;
        let build_s = t0.elapsed().as_secs_f64();
        let name = stage.retriever.name();
        let n_passages = stage.passages.len();
        sizes.insert(n_passages);
        println!(
            "{}: {name} over {n_passages} passages (built in {build_s:.1} s)",
            config.name
        );
        let served_json = Arc::new(Served::new(
            stage.retriever.clone(),
            stage.passages.clone(),
        )?);
        let served = Served::new(stage.retriever.clone(), stage.passages.clone())?;
        let server = Server::bind("127.0.0.1:0", served, serve_params.clone())?.spawn()?;
        let is_dense = config.retrieval.retrievers.len() == 1
            && config.retrieval.retrievers[0].kind() == "dense";
        let peer = match (&args.search_r1, is_dense) {
            (Some(dir), true) => Some(search_r1_peer::Peer::start(
                &root,
                dir,
                args.python.as_deref(),
                args.peer_packages.as_deref(),
                &config,
                &stage.passages,
                args.topk,
                &out.path(&format!("search-r1-{}", config.name)),
            )?),
            _ => None,
        };
        if let Some(p) = &peer {
            notes.push(format!("{}: {}.", config.name, p.describe()));
            let (torch, faiss) = p.threads();
            for (key, n) in [
                ("search_r1_torch_threads", torch),
                ("search_r1_faiss_threads", faiss),
            ] {
                if let Some(n) = n {
                    summary.insert(key.into(), n.into());
                }
            }
        }
        let mut systems = Vec::new();
        for &batch in &batches {
            systems.push(System {
                label: "in-process".into(),
                side: Side::InProcess(stage.retriever.clone()),
                batch,
                rates: Vec::new(),
            });
            systems.push(System {
                label: "in-process + JSON".into(),
                side: Side::Json {
                    served: served_json.clone(),
                    params: serve_params.clone(),
                },
                batch,
                rates: Vec::new(),
            });
            systems.push(System {
                label: WORKBENCH_SERVER.into(),
                side: Side::http(server.url()),
                batch,
                rates: Vec::new(),
            });
            if let Some(p) = &peer {
                systems.push(System {
                    label: "HTTP (Search-R1 server)".into(),
                    side: Side::http(p.url()),
                    batch,
                    rates: Vec::new(),
                });
            }
        }
        // Warm-up, and the HTTP answers checked against the in-process ones at the same batch
        // (a dense retriever's scores depend in their last bits on the batch a query is
        // encoded in, in process as over HTTP).
        let mut wants = std::collections::HashMap::new();
        for s in systems
            .iter()
            .filter(|s| matches!(s.side, Side::InProcess(_)))
        {
            wants.insert(s.batch, s.pass(&queries, args.topk)?);
        }
        for s in &systems {
            let want = &wants[&s.batch];
            let got = s.pass(&queries, args.topk)?;
            if s.label.contains("Search-R1") {
                let overlap = overlap(want, &got);
                println!(
                    "  {} batch {}: top-{} overlap with ours {overlap:.3}",
                    s.label, s.batch, args.topk
                );
                summary.insert(
                    format!(
                        "{}/search_r1_top{}_overlap_batch{}",
                        config.name, args.topk, s.batch
                    ),
                    overlap.into(),
                );
                notes.push(format!(
                    "{}: Search-R1's server encodes the queries with its own code (PyTorch, float32: the runner turns \
                     off the fp16 its `__main__` sets for GPUs) and searches the same MiniLM passage vectors; its top {} overlap ours on {:.1} % of the hits (batch {}).",
                    config.name,
                    args.topk,
                    overlap * 100.0,
                    s.batch
                ));
            } else {
                let same = want.iter().zip(&got).all(|(a, b)| {
                    a.len() == b.len()
                        && a.iter()
                            .zip(b)
                            .all(|(x, y)| x.0 == y.0 && x.1.to_bits() == y.1.to_bits())
                });
                if !same {
                    bail!(
                        "{}: {} at batch {} answered other hits than the in-process call",
                        config.name,
                        s.label,
                        s.batch
                    );
                }
            }
        }
        for round in 0..args.rounds {
            let n = systems.len();
            for j in 0..n {
                // Rotated, and reversed every other round, so that no system always runs
                // right after the same one.
                let k = (j + round) % n;
                let s = &mut systems[if round % 2 == 1 { n - 1 - k } else { k }];
                let t0 = Instant::now();
                let mut done = 0usize;
                loop {
                    let r = s.pass(&queries, args.topk)?;
                    done += r.len();
                    if t0.elapsed().as_secs_f64() >= args.min_secs {
                        break;
                    }
                }
                s.rates.push(done as f64 / t0.elapsed().as_secs_f64());
            }
        }
        for &batch in &batches {
            let base: Vec<f64> = systems
                .iter()
                .find(|s| s.batch == batch && matches!(s.side, Side::InProcess(_)))
                .map(|s| s.rates.clone())
                .context("no in-process system at this batch")?;
            let ours: Vec<f64> = systems
                .iter()
                .find(|s| s.batch == batch && s.label == WORKBENCH_SERVER)
                .map(|s| s.rates.clone())
                .context("no workbench server at this batch")?;
            for s in systems.iter().filter(|s| s.batch == batch) {
                // The workbench's server against this system, round by round.
                let vs: Vec<f64> = ours.iter().zip(&s.rates).map(|(o, r)| o / r).collect();
                let (vs_lo, vs_hi) = min_max(&vs);
                if s.label.contains("Search-R1") {
                    notes.push(format!(
                        "{} batch {batch}: the workbench's server answered {:.2}× the queries per second of Search-R1's \
                         (median of per-round ratios; range {vs_lo:.2}–{vs_hi:.2}).",
                        config.name,
                        median(&vs),
                    ));
                }
                let med = median(&s.rates);
                let (lo, hi) = min_max(&s.rates);
                let ratios: Vec<f64> = s.rates.iter().zip(&base).map(|(r, b)| r / b).collect();
                let (ratio, ratio_lo, ratio_hi) = if matches!(s.side, Side::InProcess(_)) {
                    ("–".to_string(), "–".to_string(), "–".to_string())
                } else {
                    let (a, b) = min_max(&ratios);
                    (
                        format!("{:.2}", median(&ratios)),
                        format!("{a:.2}"),
                        format!("{b:.2}"),
                    )
                };
                csv.push([
                    config.name.clone(),
                    name.clone(),
                    n_passages.to_string(),
                    s.label.clone(),
                    batch.to_string(),
                    format!("{med:.1}"),
                    format!("{lo:.1}"),
                    format!("{hi:.1}"),
                    ratio.clone(),
                    ratio_lo.clone(),
                    ratio_hi.clone(),
                    format!("{:.3}", median(&vs)),
                    format!("{vs_lo:.3}"),
                    format!("{vs_hi:.3}"),
                ])?;
                table.push([
                    config.name.clone(),
                    name.clone(),
                    thousands(n_passages as f64),
                    s.label.clone(),
                    batch.to_string(),
                    thousands(med),
                    format!("{}–{}", thousands(lo), thousands(hi)),
                    ratio,
                    if ratio_lo == "–" {
                        "–".to_string()
                    } else {
                        format!("{ratio_lo}–{ratio_hi}")
                    },
                ])?;
                summary.insert(
                    format!("{}/{}/batch{}", config.name, s.label, batch),
                    serde_json::json!({"median_qps": med, "min_qps": lo, "max_qps": hi, "rounds": s.rates, "ratio_to_in_process_per_round": ratios}),
                );
            }
        }
        summary.insert(format!("{}/passages", config.name), n_passages.into());
        summary.insert(format!("{}/build_s", config.name), build_s.into());
        drop(peer);
        drop(server);
    }
    notes.push(format!(
        "Scale: indexes of {} passages, so a request's fixed costs (JSON, HTTP) weigh more against retrieval \
         than they would over a large corpus; this measures the server's overhead, not a search engine.",
        sizes
            .iter()
            .map(|n| thousands(*n as f64))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    if args.search_r1.is_none() {
        notes.push(
            "Search-R1's server was not run (no --search-r1 checkout given); docs/server.md says what it needs."
                .into(),
        );
    }
    let load_end = load_average();
    csv.write_csv(&out.path("bench.csv"))?;
    let md = format!(
        "{}\n{}\n{}\nLoad average (1/5/15 min): start {load_start}, end {load_end}.\n",
        machine.summary(),
        table.to_markdown(),
        notes.iter().map(|n| format!("{n}\n")).collect::<String>(),
    );
    std::fs::write(out.path(SUMMARY_FILE), &md)?;
    summary.insert("queries".into(), args.queries.into());
    summary.insert("topk".into(), args.topk.into());
    summary.insert("rayon_threads".into(), threads.into());
    summary.insert("load_avg_start".into(), load_start.into());
    summary.insert("load_avg_end".into(), load_end.into());
    exp.finish(serde_json::Value::Object(summary))?;
    println!("\n{md}");
    Ok(())
}

/// The smallest and largest of `xs`.
fn min_max(xs: &[f64]) -> (f64, f64) {
    xs.iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
            (a.min(x), b.max(x))
        })
}

/// Share of `want`'s hits (by id) that `got` has for the same query.
fn overlap(want: &[Vec<(String, f32)>], got: &[Vec<(String, f32)>]) -> f64 {
    let (mut hit, mut all) = (0usize, 0usize);
    for (a, b) in want.iter().zip(got) {
        all += a.len();
        hit += a.iter().filter(|x| b.iter().any(|y| y.0 == x.0)).count();
    }
    hit as f64 / all.max(1) as f64
}

/// `1,234` (no decimals from 100 up, else two significant decimals).
fn thousands(x: f64) -> String {
    if !x.is_finite() {
        return "–".into();
    }
    if x < 100.0 {
        return format!("{x:.2}");
    }
    let s = format!("{:.0}", x);
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}
