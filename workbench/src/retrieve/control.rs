//! Control "retrievers" that bound what retrieval can add to a RAG system:
//!
//! - [`OracleRetriever`]: the question's own gold passage(s) (every passage cut from the
//!   document the question was written on, in corpus order), looked up by the question's
//!   id, since two questions may share a text: the reader's score with perfect retrieval;
//! - [`RandomRetriever`]: `k` passages drawn at random, seeded by the query text and a seed
//!   (the same query always gets the same passages): the score with passages that carry
//!   no signal.
//!
//! Closed-book (no passage at all) is a pipeline without retrievers.

use super::{check_k, Retriever};
use crate::{Error, Hit, Passage, Query, Result, Run};
use rand::seq::index::sample;
use rand::SeedableRng;
use std::collections::HashMap;

/// The gold passages of each question. See the [module docs](self).
#[derive(Debug, Clone)]
pub struct OracleRetriever {
    gold: HashMap<String, Vec<String>>,
}

impl OracleRetriever {
    /// For each `(question id, gold document id)`, the ids of the `passages` cut from
    /// that document, in corpus order. A question whose document has no passage gets none
    /// (its reader reads without passages).
    ///
    /// Errors: no question; an id given twice ([`Error::InvalidParam`] naming it).
    pub fn new<'a>(
        questions: impl IntoIterator<Item = (&'a str, &'a str)>,
        passages: &[Passage],
    ) -> Result<Self> {
        let mut by_doc: HashMap<&str, Vec<String>> = HashMap::new();
        for p in passages {
            by_doc.entry(&p.doc_id).or_default().push(p.id.clone());
        }
        let mut gold: HashMap<String, Vec<String>> = HashMap::new();
        for (id, doc) in questions {
            let ids = by_doc.get(doc).cloned().unwrap_or_default();
            if gold.insert(id.to_string(), ids).is_some() {
                return Err(Error::param(
                    "oracle",
                    format!("question id `{id}` is given twice"),
                ));
            }
        }
        if gold.is_empty() {
            return Err(Error::Empty("oracle retriever: no question".into()));
        }
        Ok(OracleRetriever { gold })
    }
}

impl Retriever for OracleRetriever {
    fn name(&self) -> String {
        "oracle".into()
    }

    /// Always an error: the oracle knows questions by id, not by text (two questions may
    /// share a text); ask with [`Retriever::retrieve_for`] or [`Retriever::retrieve_all`].
    fn retrieve(&self, query: &str, k: usize) -> Result<Vec<Hit>> {
        check_k(k)?;
        Err(Error::param(
            "oracle",
            format!(
                "the oracle looks questions up by id, not by text ({query:?}): use `retrieve_for`"
            ),
        ))
    }

    /// The gold passages of the question `question_id` (scores 1, 1/2, 1/3 … in corpus
    /// order), whatever the query text (the question, or a transformation of it).
    ///
    /// Errors: an id that is not one of the questions.
    fn retrieve_for(&self, question_id: &str, _query: &str, k: usize) -> Result<Vec<Hit>> {
        check_k(k)?;
        let ids = self.gold.get(question_id).ok_or_else(|| {
            Error::param(
                "oracle",
                format!("`{question_id}` is not one of the questions' ids (the oracle knows only their gold passages)"),
            )
        })?;
        Ok(ids
            .iter()
            .take(k)
            .enumerate()
            .map(|(i, id)| Hit::new(id.clone(), 1.0 / (i + 1) as f32))
            .collect())
    }

    /// Each query's gold passages, looked up by its id.
    fn retrieve_all(&self, queries: &[Query], k: usize) -> Result<Run> {
        let mut run = Run::new();
        for q in queries {
            run.insert(q.id.clone(), self.retrieve_for(&q.id, &q.text, k)?);
        }
        Ok(run)
    }
}

/// The oracle control as configured (`kind = "oracle"`): each question's gold passages,
/// read from the questions of the build context (SQuAD questions, whose paragraph is
/// known). No parameters.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OracleSpec {}

impl super::BuildRetriever for OracleSpec {
    fn build(&self, ctx: &crate::build::BuildCtx<'_>) -> Result<std::sync::Arc<dyn Retriever>> {
        let questions = ctx.questions.ok_or_else(|| {
            Error::param(
                "retrievers.kind",
                "`oracle` needs the questions' gold passages: it is built by a pipeline \
                 (questions.kind = \"squad\"), not a retrieval study",
            )
        })?;
        let pairs: Vec<(&str, &str)> = questions
            .iter()
            .map(|q| {
                q.context_id
                    .as_deref()
                    .map(|c| (q.id.as_str(), c))
                    .ok_or_else(|| {
                        Error::param(
                            "retrieval.retrievers.kind",
                            format!("`oracle`: question `{}` has no known gold passage", q.id),
                        )
                    })
            })
            .collect::<Result<_>>()?;
        Ok(std::sync::Arc::new(OracleRetriever::new(
            pairs,
            ctx.passages,
        )?))
    }
}

/// The random control as configured (`kind = "random"`).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RandomSpec {
    /// The seed (mixed with each query's text). Default 42.
    pub seed: u64,
}

impl Default for RandomSpec {
    fn default() -> Self {
        RandomSpec { seed: 42 }
    }
}

impl super::BuildRetriever for RandomSpec {
    fn build(&self, ctx: &crate::build::BuildCtx<'_>) -> Result<std::sync::Arc<dyn Retriever>> {
        Ok(std::sync::Arc::new(RandomRetriever::new(
            ctx.passages,
            self.seed,
        )?))
    }
}

/// Seeded random passages. See the [module docs](self).
#[derive(Debug, Clone)]
pub struct RandomRetriever {
    ids: Vec<String>,
    seed: u64,
}

impl RandomRetriever {
    /// Random passages of `passages`, seeded by `seed` and each query's text.
    ///
    /// Errors: no passage.
    pub fn new(passages: &[Passage], seed: u64) -> Result<Self> {
        if passages.is_empty() {
            return Err(Error::Empty("random retriever: no passage".into()));
        }
        Ok(RandomRetriever {
            ids: passages.iter().map(|p| p.id.clone()).collect(),
            seed,
        })
    }
}

impl Retriever for RandomRetriever {
    fn name(&self) -> String {
        format!("random-seed{}", self.seed)
    }

    /// `k` distinct passages (all when fewer), scores 1, 1/2, 1/3 … in draw order.
    fn retrieve(&self, query: &str, k: usize) -> Result<Vec<Hit>> {
        check_k(k)?;
        let h = crate::assets::sha256_bytes(query.trim().as_bytes());
        let q = u64::from_str_radix(&h[..16], 16).unwrap_or(0);
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(self.seed ^ q);
        let n = k.min(self.ids.len());
        Ok(sample(&mut rng, self.ids.len(), n)
            .into_iter()
            .enumerate()
            .map(|(i, j)| Hit::new(self.ids[j].clone(), 1.0 / (i + 1) as f32))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn passages() -> Vec<Passage> {
        (0..20)
            .map(|i| Passage {
                id: format!("d{}#{}", i / 2, i % 2),
                doc_id: format!("d{}", i / 2),
                title: String::new(),
                text: format!("passage {i}"),
                start: 0,
                end: 0,
            })
            .collect()
    }

    fn ids(hits: Vec<Hit>) -> Vec<String> {
        hits.into_iter().map(|h| h.id).collect()
    }

    #[test]
    fn the_oracle_returns_the_gold_documents_passages() {
        let o = OracleRetriever::new([("q1", "d3"), ("q2", "missing")], &passages()).unwrap();
        assert_eq!(
            ids(o.retrieve_for("q1", "Who?", 5).unwrap()),
            ["d3#0", "d3#1"]
        );
        // The query text does not matter (a transformed query gets the same gold).
        assert_eq!(
            ids(o.retrieve_for("q1", "a paraphrase", 5).unwrap()),
            ["d3#0", "d3#1"]
        );
        assert_eq!(o.retrieve_for("q1", "Who?", 1).unwrap().len(), 1);
        assert!(o.retrieve_for("q2", "Where?", 5).unwrap().is_empty());
        assert!(o.retrieve_for("q3", "Who?", 5).is_err());
        assert!(o.retrieve("Who?", 5).is_err());
        assert!(OracleRetriever::new([("q1", "d3"), ("q1", "d4")], &passages()).is_err());
    }

    #[test]
    fn questions_with_the_same_text_get_their_own_gold() {
        // Two SQuAD paragraphs share "Who conceptualized the piston?".
        let o = OracleRetriever::new([("a", "d3"), ("b", "d5")], &passages()).unwrap();
        let text = "Who conceptualized the piston?";
        assert_eq!(ids(o.retrieve_for("a", text, 5).unwrap()), ["d3#0", "d3#1"]);
        assert_eq!(ids(o.retrieve_for("b", text, 5).unwrap()), ["d5#0", "d5#1"]);
        let queries: Vec<Query> = ["a", "b"]
            .map(|id| Query {
                id: id.into(),
                text: text.into(),
            })
            .into();
        let run = o.retrieve_all(&queries, 5).unwrap();
        assert_eq!(ids(run["a"].clone()), ["d3#0", "d3#1"]);
        assert_eq!(ids(run["b"].clone()), ["d5#0", "d5#1"]);
    }

    #[test]
    fn random_passages_are_seeded_by_query_and_seed() {
        let p = passages();
        let r = RandomRetriever::new(&p, 42).unwrap();
        let a = r.retrieve("q1", 5).unwrap();
        assert_eq!(a, r.retrieve("q1", 5).unwrap());
        assert_eq!(a.len(), 5);
        let mut ids: Vec<&str> = a.iter().map(|h| h.id.as_str()).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), 5, "distinct");
        assert_ne!(a, r.retrieve("q2", 5).unwrap());
        assert_ne!(
            a,
            RandomRetriever::new(&p, 7)
                .unwrap()
                .retrieve("q1", 5)
                .unwrap()
        );
        assert_eq!(r.retrieve("q1", 50).unwrap().len(), 20);
    }
}
