//! A first-stage retriever as data: [`RetrieverSpec`], one variant per retriever, each
//! holding its own parameters, checked by [`RetrieverSpec::check`] and built by
//! [`RetrieverSpec::build`] against a [`BuildCtx`].
//!
//! In TOML it is a table with a `kind` (default `bm25`) and that kind's fields only:
//!
//! ```toml
//! [[retrieval.retrievers]]
//! kind = "bm25"
//! k1 = 1.2
//! b = 0.75
//! ```
//!
//! To add a retriever: write `retrieve/<name>.rs` with the retriever, its parameters
//! (`Serialize + Deserialize`, `#[serde(deny_unknown_fields, default)]`) and an
//! `impl `[`BuildRetriever`] for them (the trait lives in `retrieve/mod.rs`, so a retriever's
//! file and this list do not depend on each other both ways); declare the module in `retrieve/mod.rs` and add one
//! line to the `stage_specs!` list below.

pub use super::BuildRetriever;
use super::Retriever;
use crate::build::BuildCtx;
use crate::Result;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

crate::build::stage_specs! {
    /// One first-stage retriever. See the [module docs](self).
    pub enum RetrieverSpec: dyn BuildRetriever, default "bm25", table "retrievers";
    /// BM25 (Lucene variant) with the default analyzer.
    Bm25(super::bm25::Bm25Spec) = "bm25",
    /// TF-IDF cosine.
    Tfidf(super::tfidf::TfidfSpec) = "tfidf",
    /// Sentence-BERT + FAISS flat inner product (features `dense` + `faiss`).
    Dense(DenseSpec) = "dense",
    /// Control: the question's gold passage(s) (SQuAD questions, whose paragraph is known).
    Oracle(super::control::OracleSpec) = "oracle",
    /// Control: seeded random passages.
    Random(super::control::RandomSpec) = "random",
    /// A server speaking Search-R1's `/retrieve` API (the workbench's `retrieve-server`).
    Http(super::http::HttpSpec) = "http",
}

impl Default for RetrieverSpec {
    fn default() -> Self {
        RetrieverSpec::Bm25(Default::default())
    }
}

impl RetrieverSpec {
    /// Check the parameters before any work; errors name the field.
    pub fn check(&self) -> Result<()> {
        self.params().check()
    }

    /// The retriever over `ctx.passages`.
    pub fn build(&self, ctx: &BuildCtx<'_>) -> Result<Arc<dyn Retriever>> {
        self.params().build(ctx)
    }

    /// The model this retriever loads, if any (a dense retriever's encoder).
    pub fn model(&self) -> Option<&str> {
        self.params().model()
    }

    /// The model, to rewrite (a relative folder made relative to the config's folder).
    pub fn model_mut(&mut self) -> Option<&mut String> {
        self.params_mut().model_mut()
    }

    /// Whether this is a control (the oracle or random passages): it bounds what
    /// retrieval can add rather than being a retriever one would deploy.
    pub fn is_control(&self) -> bool {
        matches!(self, RetrieverSpec::Oracle(_) | RetrieverSpec::Random(_))
    }
}

/// A dense retriever's parameters: sentence vectors of an encoder, searched with a FAISS
/// flat inner-product index (features `dense` + `faiss`; the index is `retrieve::dense`,
/// compiled only with them, so its parameters live here).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DenseSpec {
    /// Encoder asset, or a folder with `config.json`, `tokenizer.json` and
    /// `model.safetensors`. Default `all-minilm-l6-v2`.
    pub model: String,
    /// Text put before every query (E5's `"query: "`, BGE's instruction). Default empty.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub query_prefix: String,
    /// Text put before every passage (E5's `"passage: "`). Default empty.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub passage_prefix: String,
}

impl Default for DenseSpec {
    fn default() -> Self {
        DenseSpec {
            model: "all-minilm-l6-v2".into(),
            query_prefix: String::new(),
            passage_prefix: String::new(),
        }
    }
}

impl BuildRetriever for DenseSpec {
    fn check(&self) -> Result<()> {
        // One file of a hub repository is a GGUF; encoders are folders.
        if matches!(
            crate::assets::ModelRef::parse(&self.model),
            crate::assets::ModelRef::Hub(_)
        ) {
            return Err(crate::assets::hub_is_one_file(
                "retrieval.retrievers.model",
                &self.model,
            ));
        }
        Ok(())
    }

    #[cfg(all(feature = "dense", feature = "faiss"))]
    fn build(&self, ctx: &BuildCtx<'_>) -> Result<Arc<dyn Retriever>> {
        use crate::encode::EmbeddingCache;
        use crate::Passage;
        let enc = ctx.encoder(&self.model)?;
        let cache = EmbeddingCache::new(ctx.env.cache_dir("embeddings"));
        let prefixed: Vec<Passage>;
        let passages = if self.passage_prefix.is_empty() {
            ctx.passages
        } else {
            prefixed = ctx
                .passages
                .iter()
                .map(|p| Passage {
                    text: format!("{}{}", self.passage_prefix, p.text),
                    ..p.clone()
                })
                .collect();
            &prefixed
        };
        Ok(Arc::new(
            super::dense::DenseRetriever::build(
                enc,
                passages,
                super::faiss::IndexParams::flat_ip(),
                Some(&cache),
            )?
            .with_query_prefix(self.query_prefix.clone()),
        ))
    }

    #[cfg(not(all(feature = "dense", feature = "faiss")))]
    fn build(&self, _ctx: &BuildCtx<'_>) -> Result<Arc<dyn Retriever>> {
        Err(crate::Error::param(
            "retrieval.retrievers.kind",
            "`dense` needs the crate features `dense` and `faiss`",
        ))
    }

    fn model(&self) -> Option<&str> {
        Some(&self.model)
    }

    fn model_mut(&mut self) -> Option<&mut String> {
        Some(&mut self.model)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(toml_text: &str) -> std::result::Result<RetrieverSpec, String> {
        toml::from_str(toml_text).map_err(|e| e.to_string())
    }

    #[test]
    fn a_table_without_kind_is_bm25_and_each_kind_takes_only_its_fields() {
        assert_eq!(
            parse("k1 = 1.2").unwrap(),
            RetrieverSpec::Bm25(super::super::bm25::Bm25Spec { k1: 1.2, b: 0.4 })
        );
        assert_eq!(parse("kind = \"tfidf\"").unwrap().kind(), "tfidf");
        let e = parse("kind = \"tfidf\"\nk1 = 1.2").unwrap_err();
        assert!(e.contains("unknown field `k1`"), "{e}");
        let e = parse("kind = \"bm26\"").unwrap_err();
        assert!(
            e.contains("unknown variant `bm26`") && e.contains("`dense`"),
            "{e}"
        );
        let d = parse("kind = \"dense\"\nquery_prefix = \"query: \"").unwrap();
        assert_eq!(d.model(), Some("all-minilm-l6-v2"));
        assert_eq!(parse("kind = \"random\"").unwrap().kind(), "random");
    }

    #[test]
    fn every_kind_round_trips_through_toml() {
        for kind in RetrieverSpec::KINDS {
            let spec = parse(&format!("kind = \"{kind}\"")).unwrap();
            assert_eq!(spec.kind(), *kind);
            let text = toml::to_string(&spec).unwrap();
            assert_eq!(parse(&text).unwrap(), spec, "{text}");
        }
    }

    #[test]
    fn errors_name_the_field_and_non_finite_numbers_are_refused() {
        let e = parse("k1 = \"x\"").unwrap_err();
        assert!(e.contains("retrievers.k1: invalid type"), "{e}");
        let e = parse("kind = \"bm26\"\nk1 = 1.0").unwrap_err();
        assert!(e.contains("retrievers.kind: unknown variant"), "{e}");
        let e = parse("kind = \"dense\"\nk1 = 1.0").unwrap_err();
        assert!(e.contains("retrievers.k1: unknown field"), "{e}");
        for bad in ["inf", "nan"] {
            let e = parse(&format!("k1 = {bad}")).unwrap().check().unwrap_err();
            assert!(e.to_string().contains("k1"), "{e}");
        }
    }

    #[test]
    fn checks_name_the_field() {
        let e = parse("kind = \"bm25\"\nk1 = -1.0")
            .unwrap()
            .check()
            .unwrap_err()
            .to_string();
        assert!(e.contains("k1"), "{e}");
        let e = parse("kind = \"dense\"\nmodel = \"hf:org/name/file.gguf\"")
            .unwrap()
            .check()
            .unwrap_err()
            .to_string();
        assert!(e.contains("retrieval.retrievers.model"), "{e}");
    }
}
