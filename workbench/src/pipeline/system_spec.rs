//! A retrieval system as data: first-stage retrievers ([`RetrieverSpec`]), their fusion
//! ([`FusionKind`], weights, RRF's k) and an optional re-ranker ([`RerankerSpec`]). The retrieval studies list their systems as `[[system]]`
//! tables of a TOML file (`configs/studies/*.toml`); `pipeline::systems` (feature
//! `dense`) builds one into a retriever.

use super::config::FusionKind;
use crate::rerank::RerankerSpec;
use crate::retrieve::RetrieverSpec;
use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use std::path::Path;

fn default_rank_constant() -> f32 {
    crate::retrieve::fusion::RRF_K
}

/// One system of a retrieval study. See the [module docs](self) for the TOML form.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SystemSpec {
    /// Row key in every table (`bm25`, `bm25+ce`, …); unique in a study.
    pub key: String,
    /// The tables' description. Default: made from the spec.
    #[serde(default)]
    pub label: String,
    /// A short title for figure panels. Default: the label.
    #[serde(default)]
    pub title: String,
    /// First-stage retrievers (at least one).
    pub retrievers: Vec<RetrieverSpec>,
    /// How several retrievers' lists are fused. Default `rrf`.
    #[serde(default)]
    pub fusion: FusionKind,
    /// One weight per retriever; empty: 1 each. Default empty.
    #[serde(default)]
    pub weights: Vec<f32>,
    /// RRF's k. Default 60.
    #[serde(default = "default_rank_constant")]
    pub rank_constant: f32,
    /// Optional re-ranker of the first stage's top `rerank.depth`.
    #[serde(default)]
    pub rerank: Option<RerankerSpec>,
}

impl SystemSpec {
    /// Passages the system returns per query: the re-ranker's depth when it has one
    /// (a re-ranker only orders the first stage's top `depth`), else `depth`.
    pub fn run_depth(&self, depth: usize) -> usize {
        self.rerank.as_ref().map_or(depth, |r| r.depth())
    }

    /// The label, or one made from the spec when none is given.
    pub fn label(&self) -> String {
        if !self.label.is_empty() {
            return self.label.clone();
        }
        let first: Vec<String> = self
            .retrievers
            .iter()
            .map(|r| r.kind().to_string())
            .collect();
        let mut s = if first.len() == 1 {
            first[0].clone()
        } else {
            format!("{:?}({})", self.fusion, first.join(" + ")).to_lowercase()
        };
        if let Some(r) = &self.rerank {
            s = format!("{s} top-{} → {} {}", r.depth(), r.variant_name(), r.model());
        }
        s
    }

    /// The title, or the label.
    pub fn title(&self) -> String {
        if self.title.is_empty() {
            self.label()
        } else {
            self.title.clone()
        }
    }

    /// Check the spec: a key, at least one retriever, one weight per retriever when
    /// weights are given, a finite non-negative RRF k, a re-rank depth of at least 1.
    pub fn check(&self) -> Result<()> {
        let bad = |m: String| Err(Error::param("system", format!("`{}`: {m}", self.key)));
        if self.key.trim().is_empty() {
            return Err(Error::param("system.key", "must not be empty"));
        }
        if self.retrievers.is_empty() {
            return bad("no retrievers".into());
        }
        if !self.weights.is_empty() && self.weights.len() != self.retrievers.len() {
            return bad(format!(
                "{} weights for {} retrievers",
                self.weights.len(),
                self.retrievers.len()
            ));
        }
        if !(self.rank_constant.is_finite() && self.rank_constant >= 0.0) {
            return bad(format!(
                "rank_constant {} must be finite and ≥ 0",
                self.rank_constant
            ));
        }
        for r in &self.retrievers {
            r.check()?;
        }
        if let Some(r) = &self.rerank {
            if r.depth() == 0 {
                return bad("rerank.depth must be at least 1".into());
            }
            r.check()?;
        }
        Ok(())
    }
}

/// The encoder assets `systems` read: dense retrievers' models and bi-encoder /
/// late-interaction re-rankers' models (a cross-encoder is a trained recipe or a folder,
/// not an asset), each once, sorted.
pub fn encoder_assets(systems: &[SystemSpec]) -> Vec<&str> {
    let mut out = std::collections::BTreeSet::new();
    for s in systems {
        for r in &s.retrievers {
            if let Some(m) = r.model() {
                out.insert(m);
            }
        }
        if let Some(r) = &s.rerank {
            if r.uses_encoder_asset() {
                out.insert(r.model());
            }
        }
    }
    out.into_iter().collect()
}

/// A TOML file of systems: `[[system]]` tables.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SystemsFile {
    /// The systems, in table order.
    pub system: Vec<SystemSpec>,
}

/// Read and check a systems file: every spec checked, keys unique. Errors name the file.
pub fn load_systems(path: &Path) -> Result<Vec<SystemSpec>> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    parse_systems(&text, path)
}

/// [`load_systems`] on text (`path` names it in errors).
pub fn parse_systems(text: &str, path: &Path) -> Result<Vec<SystemSpec>> {
    let f: SystemsFile = toml::from_str(text).map_err(|e| Error::bad_input(path, e.to_string()))?;
    check_systems(&f.system).map_err(|e| Error::bad_input(path, e.to_string()))?;
    Ok(f.system)
}

/// Check every spec and that keys are unique.
pub fn check_systems(systems: &[SystemSpec]) -> Result<()> {
    if systems.is_empty() {
        return Err(Error::param("system", "no systems"));
    }
    let mut seen = std::collections::BTreeSet::new();
    for s in systems {
        s.check()?;
        if !seen.insert(s.key.as_str()) {
            return Err(Error::param(
                "system",
                format!("key `{}` appears twice", s.key),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SYSTEMS: &str = r#"
[[system]]
key = "bm25"
label = "BM25"
retrievers = [{ kind = "bm25" }]

[[system]]
key = "hybrid"
retrievers = [{ kind = "dense" }, { kind = "bm25", k1 = 1.2 }]
fusion = "minmax"
weights = [0.5, 0.5]

[[system]]
key = "bm25+ce"
retrievers = [{ kind = "bm25" }]
rerank = { kind = "cross-encoder", model = "trained:minilm-ce", depth = 100 }
"#;

    #[test]
    fn systems_parse_with_defaults_and_labels() {
        let s = parse_systems(SYSTEMS, Path::new("s.toml")).unwrap();
        assert_eq!(s.len(), 3);
        assert_eq!(s[0].label(), "BM25");
        assert_eq!(s[0].rank_constant, 60.0);
        assert_eq!(
            s[1].retrievers[1],
            RetrieverSpec::Bm25(crate::retrieve::bm25::Bm25Spec { k1: 1.2, b: 0.4 }),
            "unset fields keep the pipeline's defaults"
        );
        assert_eq!(s[1].label(), "minmax(dense + bm25)");
        assert_eq!(s[2].run_depth(1000), 100);
        assert_eq!(s[0].run_depth(1000), 1000);
        assert!(s[2].label().contains("top-100"), "{}", s[2].label());
    }

    #[test]
    fn encoder_assets_are_the_dense_and_token_models() {
        let s = parse_systems(SYSTEMS, Path::new("s.toml")).unwrap();
        assert_eq!(
            encoder_assets(&s),
            ["all-minilm-l6-v2"],
            "the cross-encoder is not an asset"
        );
        assert!(encoder_assets(&s[..1]).is_empty(), "BM25 reads no encoder");
    }

    #[test]
    fn bad_systems_name_the_file_and_the_problem() {
        let cases = [
            ("[[system]]\nkey = \"a\"\nretrievers = []\n", "no retrievers"),
            (
                "[[system]]\nkey = \"a\"\nretrievers = [{ kind = \"bm25\" }]\n[[system]]\nkey = \"a\"\nretrievers = [{ kind = \"bm25\" }]\n",
                "appears twice",
            ),
            (
                "[[system]]\nkey = \"a\"\nretrievers = [{ kind = \"bm25\" }]\nweights = [1.0, 2.0]\n",
                "2 weights for 1 retrievers",
            ),
            (
                "[[system]]\nkey = \"a\"\nretrievers = [{ kind = \"bm25\" }]\nrerank = { kind = \"bi-encoder\", depth = 0 }\n",
                "rerank.depth",
            ),
            ("[[system]]\nkey = \"a\"\nretrievers = [{ kind = \"bm26\" }]\n", "bm26"),
            ("[[system]]\nkey = \"a\"\nretriever = []\n", "retriever"),
            ("system = []\n", "no systems"),
        ];
        for (text, want) in cases {
            let err = parse_systems(text, Path::new("dir/systems.toml"))
                .unwrap_err()
                .to_string();
            assert!(err.contains("systems.toml"), "{err}");
            assert!(err.contains(want), "{want}: {err}");
        }
    }
}
