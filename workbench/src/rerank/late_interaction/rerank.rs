//! Re-rank mode: exact mean-MaxSim over first-stage candidates ([`MaxSimReranker`]).

use super::maxsim::maxsim;
use super::store::describe_key_diff;
use super::{LateInteraction, StoreKey, TokenStore};
use crate::rerank::{finish, resolve_candidates, PassageLookup, Reranker};
use crate::{Error, Hit, Result};
use std::sync::Arc;

/// Re-rank mode (report 003 §3.2.3): exact mean-MaxSim over first-stage candidates.
///
/// Passage vectors come from an optional [`TokenStore`] (ids it holds) or are encoded on
/// the fly from the [`PassageLookup`] text.
pub struct MaxSimReranker {
    model: Arc<LateInteraction>,
    store: Option<Arc<TokenStore>>,
}

impl MaxSimReranker {
    /// Encode candidates on the fly.
    pub fn new(model: Arc<LateInteraction>) -> Self {
        MaxSimReranker { model, store: None }
    }

    /// Read candidate vectors from a store when it holds them. The store must match the
    /// model's dimension and projection; a candidate whose lookup text differs from the
    /// text the store was built from is an error naming it (never stale vectors).
    pub fn with_store(mut self, store: Arc<TokenStore>) -> Result<Self> {
        check_store(&self.model, &store)?;
        self.store = Some(store);
        Ok(self)
    }
}

pub(crate) fn check_store(model: &LateInteraction, store: &TokenStore) -> Result<()> {
    let want = model.store_key(&[]);
    let key = store.key();
    if key.dim != want.dim
        || key.model_sha256 != want.model_sha256
        || key.projection != want.projection
        || key.encoder != want.encoder
    {
        return Err(Error::param(
            "store",
            format!(
                "built with another encoder ({})",
                describe_key_diff(
                    key,
                    &StoreKey {
                        passages: key.passages.clone(),
                        ..want
                    }
                )
            ),
        ));
    }
    Ok(())
}

impl Reranker for MaxSimReranker {
    /// `maxsim-rerank-minilm-raw384`.
    fn name(&self) -> String {
        format!("maxsim-rerank-{}", self.model.label())
    }

    fn rerank(
        &self,
        query: &str,
        candidates: &[Hit],
        passages: &PassageLookup,
        k: usize,
    ) -> Result<Vec<Hit>> {
        let cands = resolve_candidates(candidates, passages, k)?;
        let q = self.model.encode_query(query)?;
        let dim = self.model.dim();
        let scores = cands
            .iter()
            .map(|c| {
                match self
                    .store
                    .as_ref()
                    .and_then(|s| s.position(c.id).map(|i| (s, i)))
                {
                    Some((s, i)) if s.holds_text(i, c.text) => Ok(s.score(&q.vectors, i)),
                    Some(_) => Err(Error::param(
                        "store",
                        format!(
                            "the token store holds passage `{}` built from another text than \
                             the passage lookup gives; rebuild the store for these passages",
                            c.id
                        ),
                    )),
                    None => Ok(maxsim(&q.vectors, &self.model.encode(c.text)?.vectors, dim)),
                }
            })
            .collect::<Result<Vec<f32>>>()?;
        finish(&cands, &scores, k)
    }
}
