//! The reader a config names (feature `llm`): the [`GenerativeReader`] set up from
//! `[reader]` and the pipeline's prompt template, wrapped so traces get its prompt.
//!
//! How the config maps onto [`ReaderOptions`]:
//!
//! - the template file becomes the user message (no system message): `{question}` and
//!   `{passages}` as they are; `{k}` is replaced by `reader.passages` (the number asked
//!   for: when the first stage returns fewer, or the window drops some, the prompt still
//!   says `reader.passages`); `{{` / `}}` become braces;
//! - a closed-book template (no `{passages}`) gets `{passages}` appended: a closed-book
//!   run gives the reader no passage, so it renders as nothing and the prompt is the
//!   template's text exactly;
//! - `reader.passage_format` with `{i}` written as the generative reader's `{rank}`;
//! - decoding: greedy when `temperature = 0`, else seeded top-p; `max_new_tokens`; the
//!   generative reader's default stop strings.

use super::Pipeline;
use crate::read::generative::{
    GenerateParams, GenerativeReader, Llm, LoadOptions, ReaderOptions, Sampling, SharedLlm,
};
use crate::read::{Answer, Context, Reader};
use crate::Result;

/// A [`GenerativeReader`] whose [`Reader::prompt`] returns the chat text of its last
/// call (the exact text the model read).
pub struct ConfiguredReader {
    inner: GenerativeReader,
    last: Option<(String, String)>,
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
    let c = &pipeline.config().reader;
    let llm = SharedLlm::new(Llm::from_asset(&c.model, &LoadOptions::default())?);
    generative_reader_on(pipeline, llm)
}

/// The reader for `pipeline` on an already loaded model (`llm` must be the model
/// `[reader].model` names: several pipelines, and their query transforms, then share one
/// copy). The reader's name is `reader.model`.
pub fn generative_reader_on(pipeline: &Pipeline, llm: SharedLlm) -> Result<ConfiguredReader> {
    let c = &pipeline.config().reader;
    let template = crate::load::read_to_string(&pipeline.config().resolve(&c.prompt))?;
    let template = template.strip_suffix('\n').unwrap_or(&template);
    let mut prompt = template
        .replace("{k}", &c.passages.to_string())
        .replace("{{", "{")
        .replace("}}", "}");
    if !pipeline.template().uses_passages() {
        prompt.push_str("{passages}");
    }
    let defaults = ReaderOptions::default();
    let opts = ReaderOptions {
        name: c.model.clone(),
        system: None,
        prompt,
        passage: c.passage_format.replace("{i}", "{rank}"),
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
            ..defaults.params
        },
        abstention: c.abstention.clone(),
    };
    Ok(ConfiguredReader {
        inner: GenerativeReader::with_shared(llm, opts)?,
        last: None,
    })
}

impl Reader for ConfiguredReader {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn read(&mut self, question: &str, passages: &[Context]) -> Result<Answer> {
        let a = self.inner.read(question, passages)?;
        self.last = Some((question.to_string(), self.inner.last_prompt().to_string()));
        Ok(a)
    }

    /// The chat text of the last [`Reader::read`] when it was for `question`.
    fn prompt(&self, question: &str, _passages: &[Context]) -> Result<Option<String>> {
        Ok(self
            .last
            .as_ref()
            .filter(|(q, _)| q == question)
            .map(|(_, p)| p.clone()))
    }
}
