//! What a stage's spec is built against: the [`BuildCtx`] a retriever's or a re-ranker's
//! spec ([`crate::retrieve::RetrieverSpec`], [`crate::rerank::RerankerSpec`]) receives in
//! its `build`.
//!
//! Building only loads. Models the workbench trains (a `trained:<recipe>` cross-encoder, a
//! ColBERT projection) arrive as files in [`TrainedModels`], filled by a resolution step
//! above the stages (`pipeline::trained`) before anything is built; a spec that names a
//! trained model the context does not hold is an error naming how to resolve it.

use crate::env::Env;
use crate::{Error, Passage, QaExample, Result};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Everything a stage's spec is built against. Build one per corpus with
/// [`BuildCtx::new`] and the `with_*` setters.
pub struct BuildCtx<'a> {
    /// Assets, cache folders.
    pub env: &'a Env,
    /// The corpus a retriever indexes and a re-ranker looks passages up in.
    pub passages: &'a [Passage],
    /// The questions, when the retrievers may look at them (the oracle control reads
    /// their gold passages); `None` in a retrieval study.
    pub questions: Option<&'a [QaExample]>,
    /// Relative model folders (a cross-encoder's checkpoint) resolve against this.
    pub base_dir: &'a Path,
    /// Trained models, resolved before building.
    pub trained: &'a TrainedModels,
    /// Late interaction: cache the corpus' token vectors under this tag (worth it when
    /// the queries' candidates cover the corpus many times over).
    pub token_store: Option<&'a str>,
    /// Encoders shared by every spec built against this context, each loaded once.
    #[cfg(feature = "dense")]
    pub encoders: &'a EncoderPool,
}

impl<'a> BuildCtx<'a> {
    /// A context over `passages`, with no questions, no trained model, models resolved
    /// against the current folder, and encoders from `encoders`.
    #[cfg(feature = "dense")]
    pub fn new(
        env: &'a Env,
        passages: &'a [Passage],
        trained: &'a TrainedModels,
        encoders: &'a EncoderPool,
    ) -> Self {
        BuildCtx {
            env,
            passages,
            questions: None,
            base_dir: Path::new("."),
            trained,
            token_store: None,
            encoders,
        }
    }

    /// A context over `passages` (without the feature `dense` there are no encoders).
    #[cfg(not(feature = "dense"))]
    pub fn new(env: &'a Env, passages: &'a [Passage], trained: &'a TrainedModels) -> Self {
        BuildCtx {
            env,
            passages,
            questions: None,
            base_dir: Path::new("."),
            trained,
            token_store: None,
        }
    }

    /// The questions the oracle control looks up.
    pub fn with_questions(mut self, questions: &'a [QaExample]) -> Self {
        self.questions = Some(questions);
        self
    }

    /// The folder relative model paths resolve against.
    pub fn with_base_dir(mut self, base_dir: &'a Path) -> Self {
        self.base_dir = base_dir;
        self
    }

    /// Late interaction caches the corpus' token vectors under `tag`.
    pub fn with_token_store(mut self, tag: Option<&'a str>) -> Self {
        self.token_store = tag;
        self
    }

    /// `model` as a path: itself when absolute, else under [`BuildCtx::base_dir`].
    pub fn resolve(&self, model: &str) -> PathBuf {
        let p = Path::new(model);
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.base_dir.join(p)
        }
    }

    /// The encoder of asset `model` with the default parameters (loaded on first use).
    #[cfg(feature = "dense")]
    pub fn encoder(&self, model: &str) -> Result<std::sync::Arc<crate::encode::BertEncoder>> {
        self.encoders.get(&self.env.assets, model)
    }
}

/// Sentence / token encoders by asset name, each loaded once.
#[cfg(feature = "dense")]
#[derive(Default)]
pub struct EncoderPool {
    loaded: std::sync::Mutex<
        std::collections::HashMap<String, std::sync::Arc<crate::encode::BertEncoder>>,
    >,
}

#[cfg(feature = "dense")]
impl EncoderPool {
    /// The encoder of asset `model` with the default parameters (loaded on first use).
    pub fn get(
        &self,
        assets: &crate::assets::Assets,
        model: &str,
    ) -> Result<std::sync::Arc<crate::encode::BertEncoder>> {
        let mut loaded = self
            .loaded
            .lock()
            .map_err(|_| Error::param("encoder", "an encoder failed to load in another thread"))?;
        if let Some(e) = loaded.get(model) {
            return Ok(e.clone());
        }
        let e = std::sync::Arc::new(crate::encode::BertEncoder::load_named(
            assets,
            model,
            crate::encode::EncoderParams::default(),
        )?);
        loaded.insert(model.to_string(), e.clone());
        Ok(e)
    }
}

/// A cross-encoder checkpoint the workbench trained, in the Hugging Face layout.
#[derive(Debug, Clone, PartialEq)]
pub struct CrossCheckpoint {
    /// The re-ranker's name in tables (`trained-<recipe>`).
    pub label: String,
    /// The folder holding `config.json`, `tokenizer.json` and `model.safetensors`.
    pub dir: PathBuf,
    /// Longest (question, passage) pair in tokens, as trained.
    pub max_length: usize,
}

/// A trained ColBERT projection of an encoder's token vectors.
#[derive(Debug, Clone, PartialEq)]
pub struct ColbertHead {
    /// The projection's safetensors file.
    pub projection: PathBuf,
    /// The tensor's name in it.
    pub tensor: String,
    /// ColBERT's query/document markers with this query length, when the recipe uses them.
    pub markers: Option<usize>,
}

/// Trained models by the spec that names them, resolved to files before building.
#[derive(Debug, Clone, Default)]
pub struct TrainedModels {
    cross: BTreeMap<String, CrossCheckpoint>,
    colbert: BTreeMap<(String, usize, usize), ColbertHead>,
}

impl TrainedModels {
    /// Hold `checkpoint` for the spec's model name `model` (`trained:<recipe>`).
    pub fn insert_cross_encoder(&mut self, model: &str, checkpoint: CrossCheckpoint) {
        self.cross.insert(model.to_string(), checkpoint);
    }

    /// Hold `head` for a late-interaction spec over `model` with `head_dim` and
    /// `head_groups`.
    pub fn insert_colbert(
        &mut self,
        model: &str,
        head_dim: usize,
        head_groups: usize,
        head: ColbertHead,
    ) {
        self.colbert
            .insert((model.to_string(), head_dim, head_groups), head);
    }

    /// Whether the cross-encoder `model` is held.
    pub fn has_cross_encoder(&self, model: &str) -> bool {
        self.cross.contains_key(model)
    }

    /// Whether the projection of (`model`, `head_dim`, `head_groups`) is held.
    pub fn has_colbert(&self, model: &str, head_dim: usize, head_groups: usize) -> bool {
        self.colbert
            .contains_key(&(model.to_string(), head_dim, head_groups))
    }

    /// The cross-encoder a spec names `model` (`trained:<recipe>`).
    pub fn cross_encoder(&self, model: &str) -> Result<&CrossCheckpoint> {
        self.cross
            .get(model)
            .ok_or_else(|| not_resolved("rerank.model", model))
    }

    /// The ColBERT projection of a late-interaction spec with `head_dim > 0`.
    pub fn colbert(
        &self,
        model: &str,
        head_dim: usize,
        head_groups: usize,
    ) -> Result<&ColbertHead> {
        self.colbert
            .get(&(model.to_string(), head_dim, head_groups))
            .ok_or_else(|| {
                not_resolved(
                    "rerank.head_dim",
                    &format!("{model} with a {head_dim}-dimensional ColBERT projection"),
                )
            })
    }

    /// How many trained models this holds.
    pub fn len(&self) -> usize {
        self.cross.len() + self.colbert.len()
    }

    /// Whether this holds no trained model.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn not_resolved(field: &'static str, what: &str) -> Error {
    Error::param(
        field,
        format!(
            "`{what}` is a trained model that was not resolved: builders only load; resolve it \
             first with `pipeline::trained::for_config` (or `for_systems`) and build with \
             `Pipeline::build_resolved` (the `rag` binary and the studies do)"
        ),
    )
}

/// A stage spec's table (`[[retrieval.retrievers]]`, `[rerank]`, the reader's own fields)
/// deserialized as the internally tagged `T`: a missing `kind` is `default_kind`, and an
/// error says which field it is about (`{table}.{field}: …`), which the tagged form alone
/// does not. Goes through [`toml::Value`], which keeps `nan` and `inf` (for the checks to
/// refuse).
pub(crate) fn tagged_table<T: serde::de::DeserializeOwned>(
    mut table: toml::Table,
    default_kind: &str,
    name: &str,
) -> std::result::Result<T, String> {
    table
        .entry("kind")
        .or_insert_with(|| toml::Value::String(default_kind.to_string()));
    T::deserialize(toml::Value::Table(table.clone())).map_err(|e| {
        let kind = table
            .get("kind")
            .cloned()
            .unwrap_or(toml::Value::Boolean(false));
        let alone = |fields: &[(&String, &toml::Value)]| -> bool {
            let mut one = toml::Table::new();
            one.insert("kind".into(), kind.clone());
            for (k, v) in fields {
                one.insert((*k).clone(), (*v).clone());
            }
            T::deserialize(toml::Value::Table(one)).is_err()
        };
        if alone(&[]) {
            return format!("{name}.kind: {e}");
        }
        let message = e.to_string();
        match table
            .iter()
            .filter(|(k, _)| *k != "kind")
            .find(|(k, v)| alone(&[(k, v)]))
        {
            Some((k, _)) => format!("{name}.{k}: {message}"),
            None => message,
        }
    })
}

/// [`tagged_table`] for any serde input: the value must be a table.
pub(crate) fn deserialize_tagged<'de, D, T>(
    d: D,
    default_kind: &str,
    name: &str,
) -> std::result::Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::de::DeserializeOwned,
{
    use serde::de::Error as _;
    use serde::Deserialize as _;
    match toml::Value::deserialize(d)? {
        toml::Value::Table(t) => tagged_table(t, default_kind, name).map_err(D::Error::custom),
        _ => Err(D::Error::custom(format!("{name} must be a table"))),
    }
}

/// Declares a stage's spec enum from one `Variant(Params) = "kind"` line per
/// implementation: the enum (serialized with `kind` as its tag), `KINDS`, `DEFAULT_KIND`,
/// `kind()`, `variant_name()`, the dispatch to the parameters' build trait (`params()`,
/// `params_mut()`), and deserialization through [`deserialize_tagged`] (a missing `kind`
/// is the default; errors name `{table}.{field}`).
macro_rules! stage_specs {
    (
        $(#[$enum_meta:meta])*
        pub enum $name:ident: dyn $build:ident, default $default:literal, table $table:literal;
        $( $(#[$meta:meta])* $variant:ident($params:ty) = $kind:literal ),* $(,)?
    ) => {
        $(#[$enum_meta])*
        #[derive(Debug, Clone, PartialEq, serde::Serialize)]
        #[serde(tag = "kind")]
        pub enum $name {
            $( $(#[$meta])* #[serde(rename = $kind)] $variant($params), )*
        }

        /// The same enum, deserialized once a missing `kind` has been filled in.
        #[derive(serde::Deserialize)]
        #[serde(tag = "kind")]
        enum Tagged {
            $( #[serde(rename = $kind)] $variant($params), )*
        }

        impl From<Tagged> for $name {
            fn from(t: Tagged) -> Self {
                match t {
                    $( Tagged::$variant(p) => $name::$variant(p), )*
                }
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
                $crate::build::deserialize_tagged::<D, Tagged>(d, Self::DEFAULT_KIND, $table)
                    .map(Into::into)
            }
        }

        impl $name {
            /// Every `kind`, in declaration order.
            pub const KINDS: &'static [&'static str] = &[$($kind),*];
            /// The `kind` when a table gives none.
            pub const DEFAULT_KIND: &'static str = $default;

            /// This implementation's `kind`.
            pub fn kind(&self) -> &'static str {
                match self {
                    $( $name::$variant(_) => $kind, )*
                }
            }

            /// The variant's name (`CrossEncoder`, …), as the studies' labels show it.
            pub fn variant_name(&self) -> &'static str {
                match self {
                    $( $name::$variant(_) => stringify!($variant), )*
                }
            }

            fn params(&self) -> &dyn $build {
                match self {
                    $( $name::$variant(p) => p, )*
                }
            }

            fn params_mut(&mut self) -> &mut dyn $build {
                match self {
                    $( $name::$variant(p) => p, )*
                }
            }
        }
    };
}
pub(crate) use stage_specs;
