//! The reader a config names (feature `llm`): [`build`] gives the reader of
//! `reader.kind` and the query transform on the same model.
//!
//! - `generative`: the [`GenerativeReader`] on `reader.model` (an asset name or a `.gguf`
//!   path), loaded once per [`ModelPool`], wrapped so traces get its prompt;
//! - `openai`: an [`OpenAiReader`] on `reader.base_url` (the same prompt, passage format,
//!   decoding settings and stop strings; the API key from `reader.api_key_env`);
//! - `extractive`: an [`ExtractiveReader`] ([`extractive_reader`]): the prompt is not used.
//!
//! How the config maps onto [`ReaderOptions`] (and [`OpenAiOptions`]):
//!
//! - the template file becomes the user message (no system message): `{question}` and
//!   `{passages}` as they are; `{k}` is replaced by `reader.passages` (the number asked
//!   for: when the first stage returns fewer, or the window drops some, the prompt still
//!   says `reader.passages`); `{{` / `}}` become braces;
//! - a closed-book template (no `{passages}`) gets `{passages}` appended: a closed-book
//!   run gives the reader no passage, so it renders as nothing and the prompt is the
//!   template's text exactly;
//! - `reader.passage_format` with `{i}` written as the generative reader's `{rank}`;
//! - `reader.system` (empty = no system message);
//! - decoding: greedy when `temperature = 0`, else seeded top-p; `max_new_tokens`;
//!   `reader.stop`.

use super::llm_transform::transform_for;
use super::{Pipeline, QueryTransform};
use crate::read::generative::{Llm, LoadOptions, SharedLlm};
use crate::read::openai::OpenAiReader;
use crate::read::spec::{ReaderCtx, ReaderSpec};
use crate::read::Reader;
use crate::{Error, Result};
use std::collections::BTreeMap;

pub use crate::read::generative::configured::ConfiguredReader;

/// GGUF models loaded once, by the value of `reader.model` (an asset name or a path).
#[derive(Debug, Default)]
pub struct ModelPool {
    models: BTreeMap<String, SharedLlm>,
}

impl ModelPool {
    /// The model `model` names (an asset name, or a `.gguf` path resolved against
    /// `pipeline`'s config), loaded on first use.
    pub fn get_for(&mut self, pipeline: &Pipeline, model: &str) -> Result<SharedLlm> {
        self.cached(model, || {
            Llm::from_model(
                model,
                "model",
                |p| pipeline.config().resolve(p),
                &LoadOptions::default(),
            )
        })
    }

    /// The model of asset `name`, loaded on first use.
    pub fn get(&mut self, name: &str) -> Result<SharedLlm> {
        self.cached(name, || Llm::from_asset(name, &LoadOptions::default()))
    }

    /// The model under `key`, loaded with `load` on first use.
    fn cached(&mut self, key: &str, load: impl FnOnce() -> Result<Llm>) -> Result<SharedLlm> {
        if let Some(m) = self.models.get(key) {
            return Ok(m.clone());
        }
        let m = SharedLlm::new(load()?);
        self.models.insert(key.to_string(), m.clone());
        Ok(m)
    }

    /// Models loaded so far.
    pub fn loaded(&self) -> Vec<String> {
        self.models.keys().cloned().collect()
    }
}

/// The LLM judge `[evaluation]` names (`None` without `judge_model`): on the server at
/// `judge_base_url` when it is set (`judge_model` is then the server's model name), else
/// on `pool`'s copy of the GGUF (the reader's own when they are the same).
pub fn judge(
    pipeline: &Pipeline,
    pool: &mut ModelPool,
) -> Result<Option<Box<dyn crate::evaluate::judge::Judge>>> {
    use crate::evaluate::judge::{LlmJudge, ServerJudge};
    let e = &pipeline.config().evaluation;
    if e.judge_model.trim().is_empty() {
        return Ok(None);
    }
    let template = crate::load::read_to_string(&pipeline.config().resolve(&e.judge_prompt))?;
    if !e.judge_base_url.trim().is_empty() {
        return Ok(Some(Box::new(ServerJudge::new(
            &e.judge_base_url,
            &e.judge_model,
            &e.judge_api_key_env,
            &template,
        )?)));
    }
    let llm = pool.get_for(pipeline, &e.judge_model)?;
    Ok(Some(Box::new(LlmJudge::new(llm, &template)?)))
}

/// A reader and the query transform on its model.
pub type ReaderAndTransform = (Box<dyn Reader>, Option<Box<dyn QueryTransform>>);

/// What a config's reader brings to a run.
pub struct ReaderParts {
    /// The reader.
    pub reader: Box<dyn Reader>,
    /// The query transform on its model, when the config has a `[query_transform]`.
    pub transform: Option<Box<dyn QueryTransform>>,
    /// Its model prompted directly, for a `[method]` that does (`None` for a reader that
    /// does not generate).
    pub lm: Option<crate::read::ctx::Generator>,
}

/// The reader `pipeline`'s `[reader]` names ([`ReaderSpec::build`]) and, when the
/// config has a `[query_transform]`, the transform on the same model (the loaded GGUF of
/// `pool`, or the same server).
pub fn build(pipeline: &Pipeline, pool: &mut ModelPool) -> Result<ReaderAndTransform> {
    let parts = build_parts(pipeline, pool)?;
    Ok((parts.reader, parts.transform))
}

/// [`build`], with the reader's model as a method's [`crate::method::Lm`] too.
pub fn build_parts(pipeline: &Pipeline, pool: &mut ModelPool) -> Result<ReaderParts> {
    let c = &pipeline.config().reader;
    let built = {
        let mut ctx = reader_ctx(pipeline, pool)?;
        c.spec.build(&mut ctx)?
    };
    let transform = match built.generator.clone() {
        Some(g) => transform_for(pipeline, g)?.map(|t| Box::new(t) as Box<dyn QueryTransform>),
        None => None,
    };
    Ok(ReaderParts {
        reader: built.reader,
        transform,
        lm: built.generator,
    })
}

/// What `pipeline`'s reader is built against: the prompt parts of its `[reader]`, its
/// folder, `pool`'s models, and the trained extractive reader resolved before building
/// ([`super::trained::for_config`]).
fn reader_ctx<'a>(pipeline: &'a Pipeline, pool: &'a mut ModelPool) -> Result<ReaderCtx<'a>> {
    let (prompt, passage) = prompt_parts(pipeline)?;
    let c = &pipeline.config().reader;
    Ok(ReaderCtx {
        prompt,
        passage,
        passage_separator: c.passage_separator.clone(),
        abstention: c.abstention.clone(),
        base_dir: &pipeline.config().base_dir,
        models: Box::new(move |m: &str| pool.get_for(pipeline, m)),
        trained_reader: pipeline.trained_reader().cloned(),
    })
}

/// The template text and passage format `[reader]` gives every reader kind: `{k}`
/// replaced, `{passages}` appended to a closed-book template, `{i}` written as `{rank}`.
/// `{{` and `}}` stay escapes: the reader unescapes them in the pass that fills
/// `{question}` and `{passages}` ([`crate::text::fill_placeholders`]), so `{{question}}`
/// reaches the model as the literal `{question}`.
fn prompt_parts(pipeline: &Pipeline) -> Result<(String, String)> {
    use crate::text::fill_placeholders_keep_escapes as fill;
    let c = &pipeline.config().reader;
    // The template file as the pipeline read it when it was built (read once).
    let template = pipeline.template().text();
    let template = template.strip_suffix('\n').unwrap_or(template);
    let mut prompt = fill(template, &[("k", &c.passages.to_string())]);
    if !pipeline.template().uses_passages() {
        prompt.push_str("{passages}");
    }
    Ok((prompt, fill(&c.passage_format, &[("i", "{rank}")])))
}

/// The extractive reader of `pipeline`'s `[reader]` (`kind = "extractive"`).
///
/// Errors: another reader kind; those of [`crate::read::extractive::from_spec`].
pub fn extractive_reader(pipeline: &Pipeline) -> Result<crate::read::extractive::ExtractiveReader> {
    let ReaderSpec::Extractive(e) = &pipeline.config().reader.spec else {
        return Err(Error::param("reader.kind", "not an extractive reader"));
    };
    let mut pool = ModelPool::default();
    let ctx = reader_ctx(pipeline, &mut pool)?;
    e.reader(&ctx)
}

/// The [`OpenAiReader`] of `pipeline`'s `[reader]` (`kind = "openai"`).
///
/// Errors: another reader kind; a bad option.
pub fn openai_reader(pipeline: &Pipeline) -> Result<OpenAiReader> {
    let ReaderSpec::Openai(o) = &pipeline.config().reader.spec else {
        return Err(Error::param("reader.kind", "not an openai reader"));
    };
    let mut pool = ModelPool::default();
    let ctx = reader_ctx(pipeline, &mut pool)?;
    OpenAiReader::new(o.options(&ctx))
}

/// Load the model of `[reader]` and build the reader for `pipeline`.
pub fn generative_reader(pipeline: &Pipeline) -> Result<ConfiguredReader> {
    let llm = ModelPool::default().get_for(pipeline, pipeline.config().reader.spec.model())?;
    generative_reader_on(pipeline, llm)
}

/// The reader for `pipeline` on an already loaded model (`llm` must be the model
/// `[reader].model` names: several pipelines, and their query transforms, then share one
/// copy). The reader's name is `reader.model` (a `.gguf` path: its file name without the
/// extension).
///
/// Errors: a reader that is not `generative`.
pub fn generative_reader_on(pipeline: &Pipeline, llm: SharedLlm) -> Result<ConfiguredReader> {
    let ReaderSpec::Generative(g) = &pipeline.config().reader.spec else {
        return Err(Error::param("reader.kind", "not a generative reader"));
    };
    let mut pool = ModelPool::default();
    let ctx = reader_ctx(pipeline, &mut pool)?;
    ConfiguredReader::new(llm, g.options(&ctx))
}
