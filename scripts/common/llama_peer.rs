//! The llama.cpp peer of the LLM benchmarks: a long-lived `scripts/python/bench_llamacpp.py`
//! process (xllamacpp's server, or a `llama-server` binary) that runs greedy generations on
//! request. Included by `bench_llm` and `bench_llm_shared` with `#[path]`.
#![allow(dead_code)] // each including binary uses a part

use anyhow::{bail, ensure, Context, Result};
use serde::Deserialize;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Stdio};
use workbench::bench::PythonPeers;

/// A batch request's answer from `bench_llamacpp.py`.
#[derive(Deserialize, Debug)]
pub struct PeerBatch {
    pub wall_ms: f64,
    pub results: Vec<PeerGen>,
}

pub const PEER: &str = "bench_llamacpp.py";

/// The long-lived `bench_llamacpp.py` process.
pub struct Peer {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    pub ready: serde_json::Value,
}

/// One llama.cpp generation, as `bench_llamacpp.py` reports it.
#[derive(Deserialize, Debug, Clone)]
pub struct PeerGen {
    pub prompt_n: usize,
    pub prompt_ms: f64,
    pub predicted_n: usize,
    pub predicted_ms: f64,
    pub tokens: Vec<u32>,
    pub stop_type: Option<String>,
    pub wall_ms: f64,
}

impl Peer {
    /// Start the peer process on `model` with `threads` threads for prompt and generation,
    /// flash attention `flash_attn` (auto, on, off) and `parallel` slots: xllamacpp's
    /// server, or the `llama-server` binary `server` when given.
    pub fn start(
        peers: &PythonPeers,
        model: &Path,
        threads: usize,
        flash_attn: &str,
        server: Option<&Path>,
        parallel: usize,
    ) -> Result<Self> {
        let mut cmd = peers.command(PEER)?;
        cmd.arg("--model")
            .arg(model)
            .args(["--threads", &threads.to_string()])
            .args(["--flash-attn", flash_attn])
            .args(["--parallel", &parallel.to_string()]);
        if let Some(bin) = server {
            cmd.arg("--server-binary").arg(bin);
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| {
                format!(
                    "starting the llama.cpp peer {PEER} with {} (make the venv with `bash scripts/bench`)",
                    peers.python().display()
                )
            })?;
        let stdin = child.stdin.take().context("peer stdin")?;
        let stdout = BufReader::new(child.stdout.take().context("peer stdout")?);
        let mut p = Peer {
            child,
            stdin,
            stdout,
            ready: serde_json::Value::Null,
        };
        let ready: serde_json::Value = p.read_line()?;
        ensure!(
            ready["ready"] == true,
            "llama.cpp peer: unexpected first line {ready}"
        );
        p.ready = ready;
        Ok(p)
    }

    /// The peer process's id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    fn read_line<T: serde::de::DeserializeOwned>(&mut self) -> Result<T> {
        let mut line = String::new();
        let n = self.stdout.read_line(&mut line)?;
        if n == 0 {
            let status = self.child.wait()?;
            bail!("the llama.cpp peer ended ({status}); its error is printed above");
        }
        serde_json::from_str(&line).with_context(|| format!("llama.cpp peer printed {line:?}"))
    }

    pub fn generate(&mut self, prompt_ids: &[u32], n_predict: usize) -> Result<PeerGen> {
        let req = serde_json::json!({ "prompt_ids": prompt_ids, "n_predict": n_predict });
        writeln!(self.stdin, "{req}")?;
        self.stdin.flush()?;
        let g: PeerGen = self.read_line()?;
        ensure!(
            g.prompt_n == prompt_ids.len(),
            "llama.cpp processed {} prompt tokens, sent {}",
            g.prompt_n,
            prompt_ids.len()
        );
        Ok(g)
    }

    /// Send `prompts` at once (the server decodes them together in its slots): the wall
    /// time seen from Python, seconds, and each prompt's tokens.
    pub fn generate_batch(
        &mut self,
        prompts: &[Vec<u32>],
        n_predict: usize,
    ) -> Result<(f64, Vec<Vec<u32>>)> {
        let req = serde_json::json!({ "batch": prompts, "n_predict": n_predict });
        writeln!(self.stdin, "{req}")?;
        self.stdin.flush()?;
        let b: PeerBatch = self.read_line()?;
        ensure!(
            b.results.len() == prompts.len(),
            "llama.cpp answered {} of {} prompts",
            b.results.len(),
            prompts.len()
        );
        for (g, p) in b.results.iter().zip(prompts) {
            ensure!(
                g.prompt_n == p.len(),
                "llama.cpp processed {} prompt tokens, sent {}",
                g.prompt_n,
                p.len()
            );
        }
        Ok((
            b.wall_ms / 1e3,
            b.results.into_iter().map(|g| g.tokens).collect(),
        ))
    }

    /// Peak resident memory of the process that holds the model (the `llama-server` child
    /// of a native build, the Python process of the wheel), bytes; the part of its resident
    /// memory that maps files now, bytes; and which process it is.
    pub fn peak_rss(&mut self) -> Result<(u64, u64, String)> {
        writeln!(self.stdin, "{{\"memory\": true}}")?;
        self.stdin.flush()?;
        #[derive(Deserialize)]
        struct Memory {
            peak_rss_bytes: u64,
            file_rss_bytes: u64,
            process: String,
        }
        let m: Memory = self.read_line()?;
        Ok((m.peak_rss_bytes, m.file_rss_bytes, m.process))
    }

    /// Seconds from the start of the model's load to a server ready to answer, as the
    /// peer measured it.
    pub fn load_secs(&self) -> f64 {
        self.ready["load_s"].as_f64().unwrap_or(f64::NAN)
    }

    pub fn stop(mut self) -> Result<()> {
        writeln!(self.stdin, "{{\"quit\": true}}")?;
        self.stdin.flush()?;
        let status = self.child.wait()?;
        ensure!(status.success(), "llama.cpp peer exited with {status}");
        Ok(())
    }
}
