//! Training groups for the rerankers: each training question with its
//! positive passage and BM25 hard negatives, `(query, positive, [negative; n])`.
//!
//! The questions and their positives are the extractive reader's supervision
//! ([`reader::supervision`]), so the split is the same one:
//!
//! * SQuAD 2.0 dev half, answerable questions of the training articles: the positive is
//!   the question's own paragraph; negatives come from the training articles' paragraphs
//!   only (the five [`HELD_OUT_ARTICLES`](super::qa_data::HELD_OUT_ARTICLES) are never
//!   read into a pool);
//! * RAG Mini Wikipedia training questions (a seeded hash split of the ids; the test
//!   questions are never used): the positive is the BM25-located passage holding the
//!   answer; negatives come from the RAG Mini passages;
//! * NQ-open dev distant supervision: the positive is the best BM25 Wikipedia window
//!   holding a gold answer; negatives come from the same Wikipedia windows.
//!
//! **Hard negatives.** BM25 (default parameters) over the source's pool returns the top
//! [`GroupParams::depth`] passages for the question; a passage is dropped when it is the
//! positive (same text), or holds a gold answer as a string ([`find_answer`]) or under
//! DPR's token match (a likely false negative). From what remains, [`GroupParams::negatives`]
//! passages are drawn without replacement by a generator seeded with
//! `(GroupParams::seed, question id)`, so a group does not depend on the others. A
//! question with fewer candidates than that is skipped and counted, never padded.

use super::qa::SpanExample;
use super::qa_data::{find_answer, SourceCounts};
use super::reader::{self, Supervision};
use crate::assets::Assets;
use crate::evaluate::answer_match::AnswerMatch;
use crate::load::rag_mini;
use crate::retrieve::analyzer::Analyzer;
use crate::retrieve::bm25::{Bm25, Bm25Params};
use crate::retrieve::Retriever;
use crate::{Error, Passage, Result};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap, HashSet};

/// A passage of a group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupPassage {
    /// Id in its pool (`squad:<n>` for the n-th distinct training-article paragraph,
    /// the RAG Mini passage id, the Wikipedia window id).
    pub id: String,
    /// The text.
    pub text: String,
}

/// One training group: a question, its positive passage and hard negatives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Group {
    /// The question id of the supervision (`squad` ids as in the file, `rag-mini:<id>`,
    /// `nq:<id>`).
    pub id: String,
    /// `squad`, `rag-mini` or `nq`.
    pub source: String,
    /// The question.
    pub query: String,
    /// The passage that answers it.
    pub positive: GroupPassage,
    /// BM25 hard negatives, in the seeded draw's order (take a prefix for fewer).
    pub negatives: Vec<GroupPassage>,
}

/// How groups are drawn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupParams {
    /// Hard negatives per group.
    pub negatives: usize,
    /// BM25 depth the negatives are drawn from.
    pub depth: usize,
    /// Seed of the draw.
    pub seed: u64,
}

impl Default for GroupParams {
    fn default() -> Self {
        GroupParams {
            negatives: 7,
            depth: 30,
            seed: 17,
        }
    }
}

impl GroupParams {
    /// Check the values.
    pub fn check(&self) -> Result<()> {
        if self.negatives == 0 {
            return Err(Error::param("negatives", "must be at least 1"));
        }
        if self.depth < self.negatives {
            return Err(Error::param(
                "depth",
                format!(
                    "{} is less than the {} negatives drawn from it",
                    self.depth, self.negatives
                ),
            ));
        }
        Ok(())
    }
}

/// What became of one source's questions.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GroupCounts {
    /// Source name.
    pub source: String,
    /// Questions of the source's training side.
    pub questions: usize,
    /// Groups made.
    pub grouped: usize,
    /// Questions not grouped, by reason (the supervision's own reasons included).
    pub skipped: BTreeMap<String, usize>,
}

/// Training groups of every source, with counts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupSet {
    /// The groups, SQuAD first, then RAG Mini, then NQ (each in supervision order).
    pub groups: Vec<Group>,
    /// Counts per source.
    pub counts: Vec<GroupCounts>,
    /// NQ question ids used (keep them out of NQ evaluations).
    pub nq_used: Vec<String>,
    /// SQuAD training article titles (the pool of the SQuAD negatives).
    pub train_articles: Vec<String>,
}

/// The seeded generator of one group's draw.
fn group_rng(seed: u64, id: &str) -> rand_chacha::ChaCha8Rng {
    let mut h = Sha256::new();
    h.update(seed.to_le_bytes());
    h.update(id.as_bytes());
    let d = h.finalize();
    let mut s = [0u8; 32];
    s.copy_from_slice(&d);
    rand_chacha::ChaCha8Rng::from_seed(s)
}

/// Groups of `examples` (one source) with hard negatives from `pool`: see the module
/// docs. Examples without an answer, or whose context is not in `pool`, are skipped and
/// counted. `pool` ids must be unique.
pub fn hard_negative_groups(
    source: &str,
    examples: &[SpanExample],
    pool: &[Passage],
    params: &GroupParams,
) -> Result<(Vec<Group>, GroupCounts)> {
    params.check()?;
    if pool.is_empty() {
        return Err(Error::Empty(format!("passage pool of `{source}`")));
    }
    let mut seen = HashSet::new();
    for p in pool {
        if !seen.insert(p.id.as_str()) {
            return Err(Error::param(
                "pool",
                format!(
                    "passage id `{}` occurs twice in the pool of `{source}`",
                    p.id
                ),
            ));
        }
    }
    let bm25 = Bm25::build(pool, &Analyzer::default(), Bm25Params::default())?;
    let by_id: HashMap<&str, &Passage> = pool.iter().map(|p| (p.id.as_str(), p)).collect();
    let by_text: HashMap<&str, &Passage> = pool.iter().map(|p| (p.text.as_str(), p)).collect();
    let rule = AnswerMatch::Dpr;
    let mut counts = GroupCounts {
        source: source.to_string(),
        questions: examples.len(),
        ..Default::default()
    };
    let skip = |c: &mut GroupCounts, why: &str| *c.skipped.entry(why.into()).or_default() += 1;
    let mut out = Vec::new();
    for ex in examples {
        if ex.answer.is_none() || ex.golds.is_empty() {
            skip(&mut counts, "no answer (no positive passage)");
            continue;
        }
        let Some(pos) = by_text.get(ex.context.as_str()) else {
            skip(&mut counts, "positive passage not in the pool");
            continue;
        };
        let golds = rule.golds(&ex.golds)?;
        let hits = bm25.retrieve(&ex.question, params.depth)?;
        let mut cands = Vec::new();
        for h in &hits {
            let p = by_id[h.id.as_str()];
            if p.text == pos.text
                || ex.golds.iter().any(|a| find_answer(&p.text, a).is_some())
                || golds.found_in(&rule.prepare(&p.text))?
            {
                continue;
            }
            cands.push(p);
        }
        if cands.len() < params.negatives {
            skip(
                &mut counts,
                "fewer answer-free passages in the BM25 top depth than negatives",
            );
            continue;
        }
        let mut rng = group_rng(params.seed, &ex.id);
        let negatives = cands
            .choose_multiple(&mut rng, params.negatives)
            .map(|p| GroupPassage {
                id: p.id.clone(),
                text: p.text.clone(),
            })
            .collect();
        out.push(Group {
            id: ex.id.clone(),
            source: ex.source.clone(),
            query: ex.question.clone(),
            positive: GroupPassage {
                id: pos.id.clone(),
                text: pos.text.clone(),
            },
            negatives,
        });
        counts.grouped += 1;
    }
    Ok((out, counts))
}

/// The distinct contexts of `examples` as a pool: ids `squad:<n>` in first-seen order
/// (the SQuAD examples do not carry their paragraph ids).
pub fn context_pool(prefix: &str, examples: &[SpanExample]) -> Vec<Passage> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for e in examples {
        if seen.insert(e.context.as_str()) {
            let id = format!("{prefix}:{}", out.len());
            out.push(Passage {
                id: id.clone(),
                doc_id: id,
                title: String::new(),
                text: e.context.clone(),
                start: 0,
                end: e.context.len(),
            });
        }
    }
    out
}

/// SQuAD groups: `examples` (the training articles' answerable questions) with
/// negatives from the paragraphs of `train_all` (every question of the training
/// articles, so every paragraph of theirs that has a question): the held-out articles'
/// paragraphs are not in the pool.
pub fn squad_groups(
    examples: &[SpanExample],
    train_all: &[SpanExample],
    params: &GroupParams,
) -> Result<(Vec<Group>, GroupCounts)> {
    let pool = context_pool("squad", train_all);
    let (g, mut c) = hard_negative_groups("squad", examples, &pool, params)?;
    c.source = "squad-v2-dev-half training articles (answerable)".into();
    Ok((g, c))
}

/// Add the supervision's counts of a source (its questions and why some were not
/// located) to the grouping counts.
fn merge(sup: Option<&SourceCounts>, mut g: GroupCounts) -> GroupCounts {
    if let Some(s) = sup {
        g.source = s.source.clone();
        g.questions = s.questions;
        for (k, v) in &s.unlocated {
            *g.skipped.entry(format!("supervision: {k}")).or_default() += v;
        }
    }
    g
}

/// Training groups of `sup`'s sources (see the module docs). The SQuAD pool is the
/// training articles' paragraphs (all their questions' contexts, unanswerable ones
/// included), the RAG Mini pool its passages, the NQ pool the Wikipedia windows
/// ([`reader::wikipedia_windows`]).
pub fn training_groups(
    assets: &Assets,
    sup: &Supervision,
    params: &GroupParams,
) -> Result<GroupSet> {
    params.check()?;
    let data = reader::supervision(assets, sup)?;
    let by_source = |s: &str| -> Vec<SpanExample> {
        data.train
            .iter()
            .filter(|e| e.source == s)
            .cloned()
            .collect()
    };
    let sup_counts = |prefix: &str| data.counts.iter().find(|c| c.source.starts_with(prefix));
    let mut set = GroupSet {
        groups: Vec::new(),
        counts: Vec::new(),
        nq_used: Vec::new(),
        train_articles: data.train_articles.clone(),
    };
    let squad = by_source("squad");
    if !squad.is_empty() {
        let (g, c) = squad_groups(&squad, &data.squad_train_all, params)?;
        set.groups.extend(g);
        set.counts.push(c);
    }
    if sup.rag_mini {
        let (docs, _) = rag_mini::load_csv(
            &assets.resolve("rag-mini-wikipedia", "infos.csv")?,
            &assets.resolve("rag-mini-wikipedia", "questions.csv")?,
        )?;
        let pool: Vec<Passage> = docs.iter().map(Passage::whole).collect();
        let (g, c) = hard_negative_groups("rag-mini", &by_source("rag-mini"), &pool, params)?;
        set.groups.extend(g);
        set.counts.push(merge(sup_counts("rag-mini"), c));
    }
    if sup.nq {
        let pool = reader::wikipedia_windows(assets)?;
        let (g, c) = hard_negative_groups("nq", &by_source("nq"), &pool, params)?;
        set.nq_used = g
            .iter()
            .map(|g| g.id.trim_start_matches("nq:").to_string())
            .collect();
        set.groups.extend(g);
        set.counts.push(merge(sup_counts("nq"), c));
    }
    if set.groups.is_empty() {
        return Err(Error::Empty("training groups (no source gave any)".into()));
    }
    Ok(set)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn passage(id: &str, text: &str) -> Passage {
        Passage {
            id: id.into(),
            doc_id: id.into(),
            title: String::new(),
            text: text.into(),
            start: 0,
            end: text.len(),
        }
    }

    fn example(id: &str, q: &str, ctx: &str, answer: &str) -> SpanExample {
        let a = ctx.find(answer).map(|s| (s, s + answer.len()));
        SpanExample {
            id: id.into(),
            source: "squad".into(),
            question: q.into(),
            context: ctx.into(),
            answer: a,
            golds: vec![answer.into()],
        }
    }

    fn pool() -> Vec<Passage> {
        vec![
            passage("p0", "The Eiffel Tower is in Paris, the capital of France."),
            passage("p1", "Paris hosts the Louvre, a museum of art in France."),
            passage("p2", "The tower in Pisa leans; Pisa is in Italy."),
            passage("p3", "Berlin is the capital of Germany and has a tower."),
            passage("p4", "A tower in Paris was built for the 1889 fair. Paris!"),
            passage("p5", "Tokyo Tower is in Japan."),
            passage("p6", "Rome is the capital of Italy."),
        ]
    }

    #[test]
    fn negatives_exclude_the_positive_and_answer_bearing_passages() {
        let pool = pool();
        let ex = example(
            "q1",
            "Which city has the Eiffel Tower tower?",
            &pool[0].text,
            "Paris",
        );
        let params = GroupParams {
            negatives: 3,
            depth: 7,
            seed: 1,
        };
        let (g, c) = hard_negative_groups("squad", &[ex], &pool, &params).unwrap();
        assert_eq!(c.grouped, 1, "{c:?}");
        let g = &g[0];
        assert_eq!(g.positive.id, "p0");
        assert_eq!(g.negatives.len(), 3);
        for n in &g.negatives {
            // p0 is the positive, p1 and p4 mention Paris (the answer).
            assert!(!["p0", "p1", "p4"].contains(&n.id.as_str()), "{n:?}");
        }
        let ids: HashSet<&str> = g.negatives.iter().map(|n| n.id.as_str()).collect();
        assert_eq!(ids.len(), 3, "drawn without replacement");
    }

    #[test]
    fn the_draw_is_seeded_per_question_and_independent_of_the_others() {
        let pool = pool();
        let a = example(
            "qa",
            "capital tower Italy Germany Japan?",
            &pool[0].text,
            "Paris",
        );
        let b = example("qb", "tower capital?", &pool[5].text, "Tokyo");
        let params = GroupParams {
            negatives: 2,
            depth: 7,
            seed: 5,
        };
        let (both, _) =
            hard_negative_groups("squad", &[a.clone(), b.clone()], &pool, &params).unwrap();
        let (alone, _) =
            hard_negative_groups("squad", std::slice::from_ref(&a), &pool, &params).unwrap();
        assert_eq!(both[0], alone[0]);
        let (again, _) = hard_negative_groups("squad", &[b, a.clone()], &pool, &params).unwrap();
        assert_eq!(again[1], alone[0]);
        // Another seed draws another subset for at least one of a few questions.
        let differs = (0..8u64).any(|s| {
            let p = GroupParams {
                seed: s,
                ..params.clone()
            };
            hard_negative_groups("squad", std::slice::from_ref(&a), &pool, &p)
                .unwrap()
                .0[0]
                .negatives
                != alone[0].negatives
        });
        assert!(differs);
    }

    #[test]
    fn skipped_questions_are_counted_by_reason() {
        let pool = pool();
        let unanswerable = SpanExample {
            answer: None,
            golds: vec![],
            ..example("u", "tower?", &pool[2].text, "Pisa")
        };
        let missing = example("m", "tower?", "A paragraph not in the pool, Pisa.", "Pisa");
        // Every passage but the positive mentions "tower" or "capital"; with 6 negatives
        // required and p1/p4 excluded for holding "Paris", too few remain.
        let few = example("f", "tower capital Paris", &pool[0].text, "Paris");
        let params = GroupParams {
            negatives: 6,
            depth: 7,
            seed: 1,
        };
        let (g, c) =
            hard_negative_groups("squad", &[unanswerable, missing, few], &pool, &params).unwrap();
        assert!(g.is_empty());
        assert_eq!(c.questions, 3);
        assert_eq!(c.grouped, 0);
        assert_eq!(c.skipped.values().sum::<usize>(), 3, "{c:?}");
        assert_eq!(c.skipped["no answer (no positive passage)"], 1);
        assert_eq!(c.skipped["positive passage not in the pool"], 1);
    }

    #[test]
    fn bad_parameters_and_pools_are_errors() {
        let pool = pool();
        let ex = example("q", "tower?", &pool[0].text, "Paris");
        let zero = GroupParams {
            negatives: 0,
            ..Default::default()
        };
        assert!(
            hard_negative_groups("s", std::slice::from_ref(&ex), &pool, &zero)
                .unwrap_err()
                .to_string()
                .contains("negatives")
        );
        let shallow = GroupParams {
            negatives: 5,
            depth: 3,
            seed: 0,
        };
        assert!(
            hard_negative_groups("s", std::slice::from_ref(&ex), &pool, &shallow)
                .unwrap_err()
                .to_string()
                .contains("depth")
        );
        let mut dup = pool.clone();
        dup.push(passage("p0", "again"));
        let e = hard_negative_groups(
            "s",
            std::slice::from_ref(&ex),
            &dup,
            &GroupParams::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("`p0`") && e.contains("twice"), "{e}");
        assert!(hard_negative_groups("s", &[ex], &[], &GroupParams::default()).is_err());
    }

    #[test]
    fn squad_negatives_never_come_from_held_out_articles() {
        // Three articles; "Held" is held out and its paragraphs match the question best.
        let para = |ctx: &str, id: &str, q: &str, a: &str| {
            let start = ctx.find(a).unwrap();
            serde_json::json!({"context": ctx, "qas": [{"id": id, "question": q,
                "is_impossible": false, "answers": [{"text": a, "answer_start": start}]}]})
        };
        let json = serde_json::json!({"version": "v2.0", "data": [
            {"title": "Train_a", "paragraphs": [
                para("The river Rhine flows to the sea at Rotterdam.", "t1", "Where does the river Rhine reach the sea?", "Rotterdam"),
                para("Rivers carry water to the sea; the Danube is a river.", "t2", "Which river is named?", "Danube"),
                para("The sea level rises when water warms.", "t3", "What rises?", "sea level")]},
            {"title": "Held", "paragraphs": [
                para("The river Rhine reaches the sea; the Rhine river sea river.", "h1", "Rhine?", "Rhine"),
                para("Where does the river Rhine reach the sea? At the sea.", "h2", "Sea?", "sea")]},
            {"title": "Train_b", "paragraphs": [
                para("A river delta forms where a river meets the sea.", "t4", "What forms?", "delta")]}
        ]});
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dev-v2.0.json");
        std::fs::write(&path, json.to_string()).unwrap();
        let split = super::super::qa_data::squad_examples(&path, &["Held"]).unwrap();
        assert_eq!(split.held_out.len(), 2);
        let params = GroupParams {
            negatives: 2,
            depth: 10,
            seed: 3,
        };
        let (g, c) = squad_groups(&split.train[..1], &split.train, &params).unwrap();
        assert_eq!(c.grouped, 1, "{c:?}");
        for n in &g[0].negatives {
            assert!(!n.text.contains("Rhine"), "held-out paragraph used: {n:?}");
        }
        // The check can fail: with the held-out paragraphs in the pool, BM25's top 3
        // (the positive and the two held-out paragraphs) give both negatives from them.
        let mut all = split.train.clone();
        all.extend(split.held_out.clone());
        let shallow = GroupParams {
            negatives: 2,
            depth: 3,
            seed: 3,
        };
        let (leaky, _) = squad_groups(&split.train[..1], &all, &shallow).unwrap();
        assert!(leaky[0].negatives.iter().all(|n| n.text.contains("Rhine")));
    }

    #[test]
    fn context_pool_dedups_in_first_seen_order() {
        let a = example("a", "q", "ctx one has Paris", "Paris");
        let b = example("b", "q", "ctx two has Rome", "Rome");
        let c = example("c", "q2", "ctx one has Paris", "Paris");
        let p = context_pool("squad", &[a, b, c]);
        assert_eq!(p.len(), 2);
        assert_eq!(p[0].id, "squad:0");
        assert_eq!(p[1].text, "ctx two has Rome");
    }
}
