//! What a reader's spec ([`super::spec::ReaderSpec`]) is built against ([`ReaderCtx`]) and
//! gives back ([`BuiltReader`]), and the trait every reader's parameters implement
//! ([`BuildReader`]). A reader written in its own file implements [`BuildReader`] from
//! here; the list of readers in `spec.rs` names it.

use crate::Result;

/// What a reader's parameters do: name their model, check themselves, and build the
/// reader ([`super::spec::ReaderSpec`] dispatches to them).
pub trait BuildReader {
    /// The model: an asset, a path, `hf:…`, `trained:<recipe>`, or a server's name for it.
    fn model(&self) -> &str;

    /// The model, to rewrite (a relative path made relative to the config's folder).
    fn model_mut(&mut self) -> &mut String;

    /// Whether the model is a file or folder the program reads (keyed in a run's
    /// identity). Default true.
    fn model_is_local(&self) -> bool {
        true
    }

    /// Whether the reader decides abstention itself ([`Answer::abstained`]) instead of
    /// the config's [`AbstentionRule`] on its text. Default false.
    fn abstains_itself(&self) -> bool {
        false
    }

    /// Whether it generates text (a query transform can then run on the same model).
    /// Default true.
    fn generates(&self) -> bool {
        true
    }

    /// Check the parameters before any work (files are checked by the config, which
    /// knows their folder); errors name the field.
    fn check(&self) -> Result<()> {
        Ok(())
    }

    /// The reader (loading, never training).
    #[cfg(feature = "llm")]
    fn build(&self, ctx: &mut ReaderCtx<'_>) -> Result<BuiltReader>;
}

/// What a built reader gives the pipeline.
#[cfg(feature = "llm")]
pub struct BuiltReader {
    /// The reader.
    pub reader: Box<dyn super::Reader>,
    /// What generates text for an LLM query transform on the same model (the loaded GGUF,
    /// or the same server); `None` for a reader that does not generate.
    pub generator: Option<Generator>,
}

/// What generates a query transform's text.
#[cfg(feature = "llm")]
#[derive(Debug, Clone)]
pub enum Generator {
    /// A GGUF model loaded in process (shared with the reader).
    Local(super::generative::SharedLlm),
    /// The reader's OpenAI-compatible server.
    Remote(std::sync::Arc<super::openai::OpenAiReader>),
}

#[cfg(feature = "llm")]
impl Generator {
    /// Whether this is the in-process model `other` (the same loaded copy).
    pub fn same_model(&self, other: &super::generative::SharedLlm) -> bool {
        matches!(self, Generator::Local(l) if l.same_model(other))
    }
}

/// Loads a GGUF model by the value of a reader's `model`.
#[cfg(feature = "llm")]
pub type ModelLoader<'a> = Box<dyn FnMut(&str) -> Result<super::generative::SharedLlm> + 'a>;

/// What a reader's spec is built against.
#[cfg(feature = "llm")]
pub struct ReaderCtx<'a> {
    /// The prompt template's text as the readers take it: `{k}` filled, `{passages}`
    /// appended to a closed-book template, `{{` / `}}` still escapes.
    pub prompt: String,
    /// One passage's format with `{i}` written as `{rank}`.
    pub passage: String,
    /// Between passages.
    pub passage_separator: String,
    /// Which answers are abstentions (readers that decide it from their text).
    pub abstention: super::AbstentionRule,
    /// Relative model paths resolve against this folder.
    pub base_dir: &'a std::path::Path,
    /// Loads a GGUF model by the value of `model` (once per pool, shared with the judge
    /// and the query transform).
    pub models: ModelLoader<'a>,
    /// A trained extractive reader (`trained:<recipe>`) resolved before building: its
    /// checkpoint folder and the windows it was trained with.
    pub trained_reader: Option<(std::path::PathBuf, super::extractive::WindowParams)>,
}

#[cfg(feature = "llm")]
impl ReaderCtx<'_> {
    /// `model` as a path: itself when absolute, else under `base_dir`.
    pub fn resolve(&self, model: &str) -> std::path::PathBuf {
        let p = std::path::Path::new(model);
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.base_dir.join(p)
        }
    }
}
