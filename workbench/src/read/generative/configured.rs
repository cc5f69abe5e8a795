//! The generative reader a `[reader]` table configures ([`ConfiguredReader`]): the
//! [`GenerativeReader`] on a loaded model, with the table's prompt, passage format,
//! decoding settings and stop strings, remembering the exact chat text of its last reads
//! for the traces.

use super::{GenerativeReader, ReaderOptions, SharedLlm};
use crate::assets::ModelRef;
use crate::read::{Answer, Context, Reader};
use crate::Result;

/// A [`GenerativeReader`] whose [`Reader::prompt`] returns the chat text of its last
/// call (the exact text the model read).
pub struct ConfiguredReader {
    inner: GenerativeReader,
    /// (question, chat text) of the last questions read, in order.
    last: Vec<(String, String)>,
}

/// A model's name for tables: an asset name as it is, a `.gguf` path or hub file by its
/// file name without the extension.
pub fn model_label(model: &str) -> String {
    match ModelRef::parse(model) {
        ModelRef::Path(p) | ModelRef::Hub(p) => std::path::Path::new(p)
            .file_stem()
            .map_or_else(|| p.to_string(), |s| s.to_string_lossy().into_owned()),
        _ => model.to_string(),
    }
}

impl ConfiguredReader {
    /// The reader with `opts` on `llm`.
    pub fn new(llm: SharedLlm, opts: ReaderOptions) -> Result<Self> {
        Ok(ConfiguredReader {
            inner: GenerativeReader::with_shared(llm, opts)?,
            last: Vec::new(),
        })
    }

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
