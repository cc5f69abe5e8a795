//! Running pipeline configs on one pool of loaded models (feature `llm`): what the
//! reproductions ([`crate::study::repro`]), the `rag` binary and the notebooks share.
//!
//! - [`ModelPool`] loads each GGUF model once; every config's reader and query transform
//!   that names it shares that copy ([`SharedLlm`](crate::read::generative::SharedLlm));
//! - [`run_config`] (and [`run_config_at`], at a scale's trained-model sizes) resolves a
//!   config's trained models, builds its pipeline, its reader on the pool's model and its
//!   LLM transform, and runs it; [`run_pipeline`] runs an already built pipeline;
//! - [`scaled`] sets a config's question count (a seeded sample) and reader model, the
//!   two things a reproduction changes between its scales.
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

pub use super::reader::ModelPool;
use super::trace::Journal;
use super::{Pipeline, PipelineConfig, PipelineRun, QueryTransform};
use crate::env::Scale;
use crate::Result;

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
        *config.reader.spec.model_mut() = r.to_string();
    }
    config
}

/// Build `config`'s pipeline, its generative reader on `pool`'s copy of `reader.model`
/// and its query transform (on the same copy), and run every question.
///
/// The trained models the config names (a `trained:` re-ranker or extractive reader, a
/// ColBERT projection) are resolved first at the published recipe sizes (the default
/// scale; [`run_config_at`] for another), and a missing re-ranker is trained.
pub fn run_config(pool: &mut ModelPool, config: PipelineConfig) -> Result<PipelineRun> {
    run_config_at(pool, config, Scale::Default)
}

/// [`run_config`] with the trained models at `scale`'s recipe sizes
/// ([`super::trained::for_config`]).
pub fn run_config_at(
    pool: &mut ModelPool,
    config: PipelineConfig,
    scale: Scale,
) -> Result<PipelineRun> {
    run_config_journaled(pool, config, scale, None)
}

/// [`run_config_at`], appending each question's trace to `journal` as it is scored and
/// taking the questions it already holds as done (a killed run continues; see
/// [`Pipeline::run_journaled`]).
pub fn run_config_journaled(
    pool: &mut ModelPool,
    config: PipelineConfig,
    scale: Scale,
    journal: Option<&mut Journal>,
) -> Result<PipelineRun> {
    let env = crate::env::Env::project()?;
    let trained =
        super::trained::for_config(&env, scale, &config, super::trained::Training::Allow)?;
    let pipeline = Pipeline::build_resolved(config, &trained)?;
    run_pipeline_journaled(pool, &pipeline, journal)
}

/// [`run_config`] for an already built pipeline: its reader ([`super::reader::build`]:
/// the in-process GGUF from `pool`, or a server) and query transform, then the LLM judge
/// when the config names one.
pub fn run_pipeline(pool: &mut ModelPool, pipeline: &Pipeline) -> Result<PipelineRun> {
    run_pipeline_journaled(pool, pipeline, None)
}

/// [`run_pipeline`] with an optional journal ([`run_config_journaled`]).
pub fn run_pipeline_journaled(
    pool: &mut ModelPool,
    pipeline: &Pipeline,
    journal: Option<&mut Journal>,
) -> Result<PipelineRun> {
    let mut parts = super::reader::build_parts(pipeline, pool)?;
    // The judge is built before reading, so a judge that cannot be built (a missing key, a
    // missing model) stops the run before its reading is spent.
    let judge = super::reader::judge(pipeline, pool)?;
    let mut run = if pipeline.config().method.is_some() {
        pipeline.run_method(
            parts.reader.as_mut(),
            parts.lm.as_mut().map(|g| g as &mut dyn crate::method::Lm),
            journal,
        )?
    } else {
        let transform = parts
            .transform
            .as_mut()
            .map(|t| t.as_mut() as &mut dyn QueryTransform);
        match journal {
            Some(j) => pipeline.run_journaled(parts.reader.as_mut(), transform, j)?,
            None => pipeline.run(parts.reader.as_mut(), transform)?,
        }
    };
    if let Some(j) = judge {
        run.judge_with(j.as_ref())?;
    }
    Ok(run)
}
