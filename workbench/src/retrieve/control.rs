//! Control "retrievers" that bound what retrieval can add to a RAG system:
//!
//! - [`OracleRetriever`]: the question's own gold passage(s) (every passage cut from the
//!   document the question was written on, in corpus order): the reader's score with
//!   perfect retrieval;
//! - [`RandomRetriever`]: `k` passages drawn at random, seeded by the query text and a seed
//!   (the same query always gets the same passages): the score with passages that carry
//!   no signal.
//!
//! Closed-book (no passage at all) is a pipeline without retrievers.

use super::{check_k, Retriever};
use crate::{Error, Hit, Passage, Result};
use rand::seq::index::sample;
use rand::SeedableRng;
use std::collections::HashMap;

/// The gold passages of each question. See the [module docs](self).
#[derive(Debug, Clone)]
pub struct OracleRetriever {
    gold: HashMap<String, Vec<String>>,
}

impl OracleRetriever {
    /// For each `(question text, gold document id)`, the ids of the `passages` cut from
    /// that document, in corpus order. A question whose document has no passage gets none
    /// (its reader reads without passages).
    ///
    /// Errors: no question.
    pub fn new<'a>(
        questions: impl IntoIterator<Item = (&'a str, &'a str)>,
        passages: &[Passage],
    ) -> Result<Self> {
        let mut by_doc: HashMap<&str, Vec<String>> = HashMap::new();
        for p in passages {
            by_doc.entry(&p.doc_id).or_default().push(p.id.clone());
        }
        let gold: HashMap<String, Vec<String>> = questions
            .into_iter()
            .map(|(q, doc)| {
                (
                    q.trim().to_string(),
                    by_doc.get(doc).cloned().unwrap_or_default(),
                )
            })
            .collect();
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

    /// The gold passages of the question `query` (scores 1, 1/2, 1/3 … in corpus order).
    ///
    /// Errors: a query that is not one of the questions (a transformed query).
    fn retrieve(&self, query: &str, k: usize) -> Result<Vec<Hit>> {
        check_k(k)?;
        let ids = self.gold.get(query.trim()).ok_or_else(|| {
            Error::param(
                "oracle",
                format!("{query:?} is not one of the questions (the oracle knows only their gold passages)"),
            )
        })?;
        Ok(ids
            .iter()
            .take(k)
            .enumerate()
            .map(|(i, id)| Hit::new(id.clone(), 1.0 / (i + 1) as f32))
            .collect())
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

    #[test]
    fn the_oracle_returns_the_gold_documents_passages() {
        let o =
            OracleRetriever::new([("Who? ", "d3"), ("Where?", "missing")], &passages()).unwrap();
        let ids: Vec<String> = o
            .retrieve("Who?", 5)
            .unwrap()
            .into_iter()
            .map(|h| h.id)
            .collect();
        assert_eq!(ids, ["d3#0", "d3#1"]);
        assert_eq!(o.retrieve("Who?", 1).unwrap().len(), 1);
        assert!(o.retrieve("Where?", 5).unwrap().is_empty());
        assert!(o.retrieve("a paraphrase", 5).is_err());
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
