//! Serve a pipeline config's first stage in Search-R1's `/retrieve` API.
//!
//! ```text
//! cargo run --release --bin retrieve-server -- configs/tiny.toml --port 8000 [--host 127.0.0.1] [--topk 3] [--set SECTION.KEY=VALUE …]
//! curl -s localhost:8000/retrieve -d '{"queries": ["Who wrote Hamlet?"], "topk": 2, "return_scores": true}'
//! ```
//!
//! Reads the config's `[corpus]`, `[chunker]` and `[retrieval]` (every retriever kind, several
//! fused as the pipeline fuses them: `workbench::pipeline::first_stage`), builds the index,
//! and answers `POST /retrieve` as Search-R1's `search_r1/search/retrieval_server.py` does
//! (`workbench::serve` documents the request, the response and the errors; docs/server.md
//! shows the calls). One line per request on stderr unless `--quiet`.

use anyhow::{Context, Result};
use clap::Parser;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use workbench::pipeline::PipelineConfig;
use workbench::serve::{ServeParams, Served, Server};

#[derive(Parser)]
#[command(about = "Serve a pipeline config's retriever in Search-R1's /retrieve API")]
struct Args {
    /// The pipeline config (TOML) whose [corpus], [chunker] and [retrieval] are served.
    config: PathBuf,
    /// Port to listen on (0: any free port, printed).
    #[arg(long, default_value_t = 8000)]
    port: u16,
    /// Address to listen on (0.0.0.0 for every interface).
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Hits per query when a request has no `topk` (Search-R1's default is 3).
    #[arg(long, default_value_t = 3)]
    topk: usize,
    /// Set a field of the config, as `rag --set` does; repeatable.
    #[arg(long = "set", value_name = "SECTION.KEY=VALUE")]
    sets: Vec<String>,
    /// Seconds a request's body may take to arrive (408 after).
    #[arg(long, default_value_t = 30.0)]
    body_timeout_secs: f64,
    /// No line per request on stderr.
    #[arg(long)]
    quiet: bool,
}

fn main() -> Result<()> {
    let args = Args::parse();
    anyhow::ensure!(
        args.body_timeout_secs.is_finite() && args.body_timeout_secs > 0.0,
        "--body-timeout-secs must be a positive number of seconds, got {}",
        args.body_timeout_secs
    );
    let config = PipelineConfig::from_file_with(&args.config, &args.sets)
        .with_context(|| format!("reading {}", args.config.display()))?;
    let t0 = Instant::now();
    let served = Served::from_config(&config)
        .with_context(|| format!("building the first stage of {}", args.config.display()))?;
    eprintln!(
        "retrieve-server: {} over {} passages, built in {:.1} s",
        served.name(),
        served.len(),
        t0.elapsed().as_secs_f64()
    );
    let params = ServeParams {
        default_topk: args.topk,
        body_timeout: Duration::from_secs_f64(args.body_timeout_secs),
        log: !args.quiet,
        ..ServeParams::default()
    };
    let server = Server::bind(&format!("{}:{}", args.host, args.port), served, params)?;
    eprintln!(
        "retrieve-server: POST http://{}/retrieve (default topk {})",
        server.local_addr()?,
        args.topk
    );
    server.run()?;
    Ok(())
}
