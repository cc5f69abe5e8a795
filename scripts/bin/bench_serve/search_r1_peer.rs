//! Search-R1's retrieval server as `bench_serve`'s peer, on a dense config: the passages
//! written as Search-R1's corpus (`{"id", "contents"}` lines), the workbench's MiniLM passage
//! vectors (from the embedding cache the in-process retriever filled) written for a FAISS flat
//! inner-product index, and `scripts/python/search_r1_server.py` started on a free port.

use anyhow::{bail, ensure, Context, Result};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use workbench::assets::Assets;
use workbench::encode::{BertEncoder, EmbeddingCache, EncoderParams};
use workbench::env::Env;
use workbench::pipeline::PipelineConfig;
use workbench::retrieve::http::contents;
use workbench::retrieve::RetrieverSpec;
use workbench::Passage;

/// A running Search-R1 server; dropping it stops the process.
pub struct Peer {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Peer {
    /// Write the corpus and vectors to `dir` and start the server; wait until it answers.
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        root: &Path,
        search_r1: &Path,
        python: Option<&Path>,
        extra_packages: Option<&Path>,
        config: &PipelineConfig,
        passages: &[Passage],
        topk: usize,
        dir: &Path,
    ) -> Result<Peer> {
        let Some(RetrieverSpec::Dense(spec)) = config.retrieval.retrievers.first() else {
            bail!("Search-R1's peer serves a dense config");
        };
        ensure!(
            spec.query_prefix.is_empty() && spec.passage_prefix.is_empty(),
            "Search-R1's encoder adds prefixes only for E5 and BGE models; a config with prefixes is not compared"
        );
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let assets = Assets::load()?;
        let env = Env::project()?;
        let encoder = BertEncoder::load_named(&assets, &spec.model, EncoderParams::default())?;
        let vectors =
            EmbeddingCache::new(env.cache_dir("embeddings")).get_or_compute(&encoder, passages)?;
        let corpus = dir.join("corpus.jsonl");
        let mut f = std::io::BufWriter::new(std::fs::File::create(&corpus)?);
        for p in passages {
            serde_json::to_writer(
                &mut f,
                &serde_json::json!({"id": p.id, "contents": contents(&p.title, &p.text)}),
            )?;
            f.write_all(b"\n")?;
        }
        f.flush()?;
        let vectors_path = dir.join("vectors.f32");
        let mut f = std::io::BufWriter::new(std::fs::File::create(&vectors_path)?);
        for v in &vectors {
            for x in v {
                f.write_all(&x.to_le_bytes())?;
            }
        }
        f.flush()?;
        let model_dir = assets.resolve_all(&spec.model)?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let python: PathBuf = python
            .map(Path::to_path_buf)
            .unwrap_or_else(workbench::bench::PythonPeers::default_python);
        let log_path = dir.join("server.log");
        let log = std::fs::File::create(&log_path)?;
        let mut cmd = Command::new(&python);
        cmd.arg(root.join("scripts/python/search_r1_server.py"))
            .arg("--search-r1")
            .arg(search_r1)
            .arg("--corpus")
            .arg(&corpus)
            .arg("--vectors")
            .arg(&vectors_path)
            .arg("--dim")
            .arg(encoder.dim().to_string())
            .arg("--model")
            .arg(&model_dir)
            .arg("--topk")
            .arg(topk.to_string())
            .arg("--port")
            .arg(port.to_string())
            // PyTorch's and FAISS's threads: as many as the workbench's rayon pool. FAISS's
            // through OpenMP's environment, which also holds in the web server's worker
            // threads (`omp_set_num_threads` sets only the calling thread's).
            .arg("--threads")
            .arg(rayon::current_num_threads().to_string())
            .env("OMP_NUM_THREADS", rayon::current_num_threads().to_string())
            .stdout(Stdio::null())
            .stderr(log);
        if let Some(extra) = extra_packages {
            cmd.arg("--extra-packages").arg(extra);
        }
        let child = cmd
            .spawn()
            .with_context(|| format!("starting {}", python.display()))?;
        let mut peer = Peer {
            child,
            port,
            log: log_path.clone(),
        };
        let t0 = Instant::now();
        let agent = ureq::AgentBuilder::new()
            .timeout(Duration::from_secs(60))
            .build();
        loop {
            if let Some(status) = peer.child.try_wait()? {
                let log = std::fs::read_to_string(&log_path).unwrap_or_default();
                bail!("Search-R1's server exited ({status}) before answering:\n{log}");
            }
            let ok = agent
                .post(&peer.url())
                .send_json(
                    serde_json::json!({"queries": ["warm up"], "topk": 1, "return_scores": true}),
                )
                .is_ok();
            if ok {
                break;
            }
            if t0.elapsed() > Duration::from_secs(600) {
                let log = std::fs::read_to_string(&log_path).unwrap_or_default();
                bail!("Search-R1's server did not answer within 600 s:\n{log}");
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        println!(
            "  Search-R1's server answering after {:.1} s ({})",
            t0.elapsed().as_secs_f64(),
            peer.url()
        );
        Ok(peer)
    }

    /// The runner's line naming its versions and threads.
    pub fn describe(&self) -> String {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .find(|l| l.starts_with("search-r1 server:"))
            .unwrap_or("search-r1 server: (no description in its log)")
            .to_string()
    }

    /// The threads its runner reports for PyTorch and for FAISS, read from
    /// [`Peer::describe`]'s line; `None` for one it does not name.
    pub fn threads(&self) -> (Option<usize>, Option<usize>) {
        threads_in(&self.describe())
    }

    /// Its `/retrieve` endpoint.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/retrieve", self.port)
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The numbers of threads in the runner's line `… torch 2.15.0 (2 threads), faiss 1.15.1 (2
/// threads).`: (PyTorch's, FAISS's).
fn threads_in(line: &str) -> (Option<usize>, Option<usize>) {
    let after = |name: &str| -> Option<usize> {
        let rest = &line[line.find(&format!("{name} "))? + name.len() + 1..];
        // This library's part only: up to the next comma.
        let rest = &rest[..rest.find(',').unwrap_or(rest.len())];
        let open = rest.find('(')?;
        let inner = &rest[open + 1..open + rest[open..].find(')')?];
        inner.strip_suffix(" threads")?.trim().parse().ok()
    };
    (after("torch"), after("faiss"))
}

#[cfg(test)]
mod tests {
    use super::threads_in;

    #[test]
    fn the_runners_line_gives_each_librarys_threads() {
        let line = "search-r1 server: 3211 passages, http://127.0.0.1:40765/retrieve, \
                    torch 2.15.0+cu132 (2 threads), faiss 1.15.1 (4 threads).";
        assert_eq!(threads_in(line), (Some(2), Some(4)));
        assert_eq!(
            threads_in("search-r1 server: (no description in its log)"),
            (None, None)
        );
        assert_eq!(threads_in("torch 2.15.0 (two threads)"), (None, None));
        // A library without its count does not take the next one's.
        assert_eq!(
            threads_in("torch 2.15.0, faiss 1.15.1 (4 threads)."),
            (None, Some(4))
        );
    }
}
