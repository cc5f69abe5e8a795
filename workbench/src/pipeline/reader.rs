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

use super::config::{ReadMode, ReaderKind};
use super::llm_transform::{transform_for, Generator};
use super::{Pipeline, QueryTransform};
use crate::assets::ModelRef;
use crate::read::extractive::ExtractiveReader;
use crate::read::generative::{
    GenerateParams, GenerativeReader, Llm, LoadOptions, ReaderOptions, Sampling, SharedLlm,
};
use crate::read::openai::{OpenAiOptions, OpenAiReader};
use crate::read::{Answer, Context, Reader};
use crate::{Error, Result};
use std::collections::BTreeMap;
use std::sync::Arc;

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

/// The reader `pipeline`'s `[reader]` names and, when the config has a
/// `[query_transform]`, the transform on the same model (the loaded GGUF of `pool`, or
/// the same server).
pub fn build(pipeline: &Pipeline, pool: &mut ModelPool) -> Result<ReaderAndTransform> {
    let c = &pipeline.config().reader;
    match c.kind {
        ReaderKind::Generative => {
            let llm = pool.get_for(pipeline, &c.model)?;
            let reader = generative_reader_on(pipeline, llm)?;
            let transform = transform_for(pipeline, Generator::Local(reader.llm().clone()))?
                .map(|t| Box::new(t) as Box<dyn QueryTransform>);
            Ok((Box::new(reader), transform))
        }
        ReaderKind::Extractive => Ok((Box::new(extractive_reader(pipeline)?), None)),
        ReaderKind::Openai => {
            let reader = Arc::new(openai_reader(pipeline)?);
            let transform = transform_for(pipeline, Generator::Remote(reader.clone()))?
                .map(|t| Box::new(t) as Box<dyn QueryTransform>);
            Ok((Box::new(SharedOpenAi(reader)), transform))
        }
    }
}

/// An [`OpenAiReader`] shared with the query transform.
struct SharedOpenAi(Arc<OpenAiReader>);

impl Reader for SharedOpenAi {
    fn name(&self) -> &str {
        Reader::name(&*self.0)
    }
    fn read(&mut self, question: &str, passages: &[Context]) -> Result<Answer> {
        self.0.answer(question, passages)
    }
    fn prompt(&self, question: &str, passages: &[Context]) -> Result<Option<String>> {
        Reader::prompt(&*self.0, question, passages)
    }
    fn concurrency(&self) -> usize {
        self.0.options().concurrency
    }
    fn read_many(&mut self, items: &[(&str, &[Context])]) -> Vec<Result<Answer>> {
        self.0.answer_many(items)
    }
}

/// A model's name for tables: an asset name as it is, a `.gguf` path or hub file by its file
/// name without the extension.
fn model_label(model: &str) -> String {
    match ModelRef::parse(model) {
        ModelRef::Path(p) | ModelRef::Hub(p) => std::path::Path::new(p)
            .file_stem()
            .map_or_else(|| p.to_string(), |s| s.to_string_lossy().into_owned()),
        _ => model.to_string(),
    }
}

/// The template text and passage format `[reader]` gives both reader kinds: `{k}`
/// replaced, `{passages}` appended to a closed-book template, `{i}` written as `{rank}`.
/// `{{` and `}}` stay escapes: the reader unescapes them in the pass that fills
/// `{question}` and `{passages}` ([`crate::text::fill_placeholders`]), so `{{question}}`
/// reaches the model as the literal `{question}`.
fn prompt_parts(pipeline: &Pipeline) -> Result<(String, String)> {
    use crate::text::fill_placeholders_keep_escapes as fill;
    let c = &pipeline.config().reader;
    let template = crate::load::read_to_string(&pipeline.config().resolve(&c.prompt))?;
    let template = template.strip_suffix('\n').unwrap_or(&template);
    let mut prompt = fill(template, &[("k", &c.passages.to_string())]);
    if !pipeline.template().uses_passages() {
        prompt.push_str("{passages}");
    }
    Ok((prompt, fill(&c.passage_format, &[("i", "{rank}")])))
}

/// The [`ExtractiveReader`] of `[reader]` (`kind = "extractive"`): a QA folder or asset,
/// or a reader the workbench trained (`trained:<recipe>`, the recipe at the default scale
/// or its `-quick` variant, read from the cache with the recipe's windows).
///
/// Errors: a `trained:` reader that is not in the cache ([`Error::InvalidParam`] naming
/// `reader.model` and the command that trains it); a folder that is not a QA checkpoint.
pub fn extractive_reader(pipeline: &Pipeline) -> Result<ExtractiveReader> {
    use crate::read::extractive::{DecodeParams, MultiPassage, ReaderParams};
    use crate::train::reader::{ReaderRecipe, TrainedReader};
    let c = &pipeline.config().reader;
    let params = ReaderParams {
        mode: match c.read_mode {
            ReadMode::Concatenate => MultiPassage::Concatenate,
            ReadMode::BestPerPassage => MultiPassage::BestPerPassage,
        },
        decode: DecodeParams {
            null_threshold: c.null_threshold.map(|t| t as f32),
            ..DecodeParams::default()
        },
        ..ReaderParams::default()
    };
    match ModelRef::parse(&c.model) {
        ModelRef::Trained(name) => {
            let env = crate::env::Env::project()?;
            let recipe = ReaderRecipe::at_scale(name, crate::env::Scale::Default)?;
            let dir = env.cache_dir("readers").join(recipe.key(&env.assets)?);
            match crate::train::checkpoint::read_done::<TrainedReader>(&dir)? {
                Some((t, _)) => ExtractiveReader::load_dir(
                    &t.model_dir,
                    ReaderParams {
                        window: t.recipe.windows,
                        ..params
                    },
                ),
                None => Err(Error::param(
                    "reader.model",
                    format!(
                        "`{}` is not trained yet ({} has no finished run): train it with \
                         `cargo run --release --bin train_reader -- --recipe {}{}`",
                        c.model,
                        dir.display(),
                        name.trim_end_matches("-quick"),
                        if name.ends_with("-quick") {
                            " --scale quick"
                        } else {
                            ""
                        }
                    ),
                )),
            }
        }
        ModelRef::Path(p) => {
            let dir = pipeline.config().resolve(p);
            let params = fit_window(params, &dir.join("config.json"))?;
            ExtractiveReader::load_dir(dir, params)
        }
        ModelRef::Asset(a) => {
            let assets = crate::assets::Assets::load()?;
            let params = fit_window(params, &assets.resolve(a, "config.json")?)?;
            ExtractiveReader::load_asset(&assets, a, params)
        }
        ModelRef::Hub(_) => Err(crate::assets::hub_is_one_file("reader.model", &c.model)),
    }
}

/// `params` with windows no longer than the model of `config` allows (a small model's
/// position limit below the default 384 tokens: the window is cut to it, the stride to a
/// quarter of it at most).
fn fit_window(
    mut params: crate::read::extractive::ReaderParams,
    config: &std::path::Path,
) -> Result<crate::read::extractive::ReaderParams> {
    let limit = crate::read::extractive::QaConfig::from_file(config)?.max_positions;
    let w = &mut params.window;
    if w.max_seq_len > limit {
        w.max_seq_len = limit;
        w.doc_stride = w.doc_stride.min(limit / 4);
    }
    Ok(params)
}

/// The [`OpenAiReader`] of `[reader]` (`kind = "openai"`).
pub fn openai_reader(pipeline: &Pipeline) -> Result<OpenAiReader> {
    let c = &pipeline.config().reader;
    let (prompt, passage) = prompt_parts(pipeline)?;
    OpenAiReader::new(OpenAiOptions {
        base_url: c.base_url.clone(),
        model: c.model.clone(),
        api_key_env: c.api_key_env.clone(),
        name: c.model.clone(),
        system: Some(c.system.clone()).filter(|s| !s.is_empty()),
        prompt,
        passage,
        passage_separator: c.passage_separator.clone(),
        temperature: c.temperature,
        top_p: c.top_p,
        seed: c.seed,
        max_tokens: c.max_new_tokens,
        stop: c.stop.clone(),
        concurrency: c.concurrency,
        timeout_secs: c.timeout_secs,
        retries: c.retries,
        backoff_secs: c.backoff_secs,
        abstention: c.abstention.clone(),
    })
}

/// A [`GenerativeReader`] whose [`Reader::prompt`] returns the chat text of its last
/// call (the exact text the model read).
pub struct ConfiguredReader {
    inner: GenerativeReader,
    /// (question, chat text) of the last questions read, in order.
    last: Vec<(String, String)>,
}

impl ConfiguredReader {
    /// The wrapped reader.
    pub fn inner(&self) -> &GenerativeReader {
        &self.inner
    }

    /// The model's handle, to share it (an LLM query transform, another pipeline's
    /// reader) instead of loading it again.
    pub fn llm(&self) -> &SharedLlm {
        self.inner.llm()
    }
}

/// Load the model of `[reader]` and build the reader for `pipeline`.
pub fn generative_reader(pipeline: &Pipeline) -> Result<ConfiguredReader> {
    let llm = ModelPool::default().get_for(pipeline, &pipeline.config().reader.model)?;
    generative_reader_on(pipeline, llm)
}

/// The reader for `pipeline` on an already loaded model (`llm` must be the model
/// `[reader].model` names: several pipelines, and their query transforms, then share one
/// copy). The reader's name is `reader.model` (a `.gguf` path: its file name without the
/// extension).
pub fn generative_reader_on(pipeline: &Pipeline, llm: SharedLlm) -> Result<ConfiguredReader> {
    let c = &pipeline.config().reader;
    let (prompt, passage) = prompt_parts(pipeline)?;
    let defaults = ReaderOptions::default();
    let opts = ReaderOptions {
        name: model_label(&c.model),
        system: Some(c.system.clone()).filter(|s| !s.is_empty()),
        prompt,
        passage,
        passage_separator: c.passage_separator.clone(),
        params: GenerateParams {
            max_new_tokens: c.max_new_tokens,
            sampling: if c.temperature == 0.0 {
                Sampling::Greedy
            } else {
                Sampling::TopP {
                    temperature: c.temperature as f32,
                    top_p: c.top_p as f32,
                    seed: c.seed,
                }
            },
            stop_strings: c.stop.clone(),
            ..defaults.params
        },
        abstention: c.abstention.clone(),
        batch: c.concurrency,
    };
    Ok(ConfiguredReader {
        inner: GenerativeReader::with_shared(llm, opts)?,
        last: Vec::new(),
    })
}

impl Reader for ConfiguredReader {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn read(&mut self, question: &str, passages: &[Context]) -> Result<Answer> {
        let a = self.inner.read(question, passages)?;
        self.last = vec![(question.to_string(), self.inner.last_prompt().to_string())];
        Ok(a)
    }

    fn concurrency(&self) -> usize {
        self.inner.concurrency()
    }

    fn read_many(&mut self, items: &[(&str, &[Context])]) -> Vec<Result<Answer>> {
        let answers = self.inner.read_many(items);
        self.last = items
            .iter()
            .zip(self.inner.last_prompts())
            .map(|((q, _), p)| (q.to_string(), p.clone()))
            .collect();
        answers
    }

    /// The chat text of `question` when it was among the last questions read.
    fn prompt(&self, question: &str, _passages: &[Context]) -> Result<Option<String>> {
        Ok(self
            .last
            .iter()
            .find(|(q, p)| q == question && !p.is_empty())
            .map(|(_, p)| p.clone()))
    }
}
