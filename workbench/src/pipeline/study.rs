//! Running several pipeline configs as one study (feature `llm`): the reproductions of
//! reports 001, 002 and 004 (`scripts/bin/exp_report00{1,2,4}.rs`) and the notebooks.
//!
//! - [`ModelPool`] loads each GGUF model once; every config's reader and query transform
//!   that names it shares that copy ([`SharedLlm`]);
//! - [`run_config`] builds a config's pipeline, its reader on the pool's model and its
//!   LLM transform, and runs it;
//! - [`scaled`] sets a config's question count (a seeded sample) and reader model, the
//!   two things a reproduction changes between its default scale and its full run;
//! - [`side_by_side`] puts our numbers beside a report's in one table.
//!
//! ```no_run
//! # fn main() -> workbench::Result<()> {
//! use workbench::pipeline::study::{run_config, ModelPool};
//! let mut pool = ModelPool::default();
//! let config = workbench::pipeline::PipelineConfig::from_file("configs/report004_naive.toml".as_ref())?;
//! let run = run_config(&mut pool, workbench::pipeline::study::scaled(config, Some(5), None))?;
//! println!("{}", run.summary().to_table().to_markdown());
//! # Ok(()) }
//! ```

use super::llm_transform::transform_for;
use super::reader::generative_reader_on;
use super::{Pipeline, PipelineConfig, PipelineRun, QueryTransform};
use crate::display::Table;
use crate::read::generative::{Llm, LoadOptions, SharedLlm};
use crate::Result;
use std::collections::BTreeMap;

/// GGUF models loaded once, by asset name.
#[derive(Debug, Default)]
pub struct ModelPool {
    models: BTreeMap<String, SharedLlm>,
}

impl ModelPool {
    /// The model of asset `name`, loaded on first use.
    pub fn get(&mut self, name: &str) -> Result<SharedLlm> {
        if let Some(m) = self.models.get(name) {
            return Ok(m.clone());
        }
        let m = SharedLlm::new(Llm::from_asset(name, &LoadOptions::default())?);
        self.models.insert(name.to_string(), m.clone());
        Ok(m)
    }

    /// Models loaded so far.
    pub fn loaded(&self) -> Vec<String> {
        self.models.keys().cloned().collect()
    }
}

/// `config` with `questions.limit` set to `questions` (`Some(0)`: every question; `None`:
/// as the file says) and `reader.model` set to `reader` (`None`: as the file says).
pub fn scaled(
    mut config: PipelineConfig,
    questions: Option<usize>,
    reader: Option<&str>,
) -> PipelineConfig {
    if let Some(n) = questions {
        config.questions.limit = n;
    }
    if let Some(r) = reader {
        config.reader.model = r.to_string();
    }
    config
}

/// Build `config`'s pipeline, its generative reader on `pool`'s copy of `reader.model`
/// and its query transform (on the same copy), and run every question.
pub fn run_config(pool: &mut ModelPool, config: PipelineConfig) -> Result<PipelineRun> {
    let pipeline = Pipeline::build(config)?;
    run_pipeline(pool, &pipeline)
}

/// [`run_config`] for an already built pipeline.
pub fn run_pipeline(pool: &mut ModelPool, pipeline: &Pipeline) -> Result<PipelineRun> {
    let llm = pool.get(&pipeline.config().reader.model)?;
    let mut reader = generative_reader_on(pipeline, llm)?;
    let mut transform = transform_for(pipeline, reader.llm())?;
    pipeline.run(
        &mut reader,
        transform.as_mut().map(|t| t as &mut dyn QueryTransform),
    )
}

/// A number of ours beside the report's, for [`side_by_side`].
#[derive(Debug, Clone, PartialEq)]
pub struct Compared {
    /// Row label (system).
    pub system: String,
    /// Column label (metric).
    pub metric: String,
    /// Our value.
    pub ours: Option<f64>,
    /// The report's value.
    pub report: Option<f64>,
}

/// One row per system, a pair of columns (`<metric>` and `<metric> (report)`) per
/// metric, in first-seen order; `decimals` per metric (default 2).
pub fn side_by_side(rows: &[Compared], decimals: &BTreeMap<&str, usize>, caption: &str) -> Table {
    let mut systems: Vec<&str> = Vec::new();
    let mut metrics: Vec<&str> = Vec::new();
    for r in rows {
        if !systems.contains(&r.system.as_str()) {
            systems.push(&r.system);
        }
        if !metrics.contains(&r.metric.as_str()) {
            metrics.push(&r.metric);
        }
    }
    let mut header = vec!["system".to_string()];
    for m in &metrics {
        header.push(m.to_string());
        header.push(format!("{m} (report)"));
    }
    let mut t = Table::new(header).caption(caption);
    let f = |x: Option<f64>, d: usize| x.map_or("–".to_string(), |v| format!("{v:.d$}"));
    for s in &systems {
        let mut row = vec![s.to_string()];
        for m in &metrics {
            let d = decimals.get(m).copied().unwrap_or(2);
            let cell = rows.iter().find(|r| r.system == *s && r.metric == *m);
            row.push(f(cell.and_then(|c| c.ours), d));
            row.push(f(cell.and_then(|c| c.report), d));
        }
        t.push(row).expect("one cell per column");
    }
    t
}

/// `/proc/loadavg`'s first three numbers (the load the timings were measured under).
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}
