//! Iter-RetGen (Shao et al., 2023): retrieval and generation in turns, each retrieval
//! with the question and the previous turn's answer, so an answer's words can find the
//! passage that confirms or corrects it.
//!
//! Turn 1 retrieves with the question; turn `t > 1` with `"{question} {answer of turn
//! t-1}"` (an abstention adds nothing). The reader answers over each turn's passages; the
//! last turn's answer is the answer. A turn whose query would repeat the previous turn's
//! (after an abstention) is not run: the same passages would give the same read, so the
//! turns stop there and the trace and the counts hold only the work done.

use super::recorder::at_least_one;
use super::recorder::Recorder;
use crate::Result;
use serde::{Deserialize, Serialize};

/// Parameters of `kind = "iter-retgen"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct IterRetgen {
    /// Retrieve-and-read turns (≥ 1). Default 3 (FlashRAG's).
    pub iterations: usize,
}

impl Default for IterRetgen {
    fn default() -> Self {
        IterRetgen { iterations: 3 }
    }
}

impl IterRetgen {
    pub(crate) fn check(&self) -> Result<()> {
        at_least_one("method.iterations", self.iterations)
    }
}

/// Run the method (see the [module docs](self)); returns the answer and its abstention.
pub(crate) fn run(
    p: &IterRetgen,
    question: &str,
    rec: &mut Recorder<'_>,
) -> Result<(String, bool)> {
    let mut last: Option<(String, bool)> = None;
    let mut previous_query: Option<String> = None;
    for t in 0..p.iterations {
        let query = match &last {
            Some((text, false)) if !text.trim().is_empty() => format!("{question} {}", text.trim()),
            _ => question.to_string(),
        };
        if previous_query.as_deref() == Some(query.as_str()) {
            break;
        }
        previous_query = Some(query.clone());
        let passages = rec.search(
            &query,
            if t == 0 {
                "question"
            } else {
                "question + answer"
            },
        )?;
        let a = rec.read(question, &passages, "answer")?;
        let abstained = rec.abstains(&a);
        last = Some((a.text, abstained));
    }
    Ok(last.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;

    #[test]
    fn each_turn_retrieves_with_the_previous_answer() {
        // The question finds the first hop; its answer ("vienna") finds the second.
        let mut search = corpus_search(&[
            ("austria", "capital of austria = Vienna"),
            ("vienna", "river of vienna = Danube"),
        ]);
        let out = run_scripted(&mut search, None, |rec| {
            run(
                &IterRetgen { iterations: 2 },
                "Which river flows through the capital of Austria?",
                rec,
            )
        })
        .unwrap();
        let queries: Vec<&str> = out
            .steps
            .iter()
            .filter_map(|s| s.query.as_deref())
            .collect();
        assert_eq!(
            queries,
            [
                "Which river flows through the capital of Austria?",
                "Which river flows through the capital of Austria?",
                "Which river flows through the capital of Austria? Vienna",
                "Which river flows through the capital of Austria?",
            ]
        );
        assert_eq!(out.retrieval_calls(), 2);
        // Turn 2's passages: austria then vienna; the reader takes the first → Vienna again.
        assert_eq!(out.answer.text, "Vienna");
        assert_eq!(out.answer.passage_ids, ["austria", "vienna"]);
        assert_eq!(out.answer.usage.prompt_tokens, 20);
    }

    #[test]
    fn a_turn_that_would_repeat_the_previous_query_is_not_run() {
        // Nothing answers the question: turn 1 abstains, turn 2 would search the same
        // query again and read the same passages.
        let mut search = corpus_search(&[("austria", "capital of austria = Vienna")]);
        let out = run_scripted(&mut search, None, |rec| {
            run(
                &IterRetgen { iterations: 3 },
                "Who painted the Mona Lisa?",
                rec,
            )
        })
        .unwrap();
        assert_eq!(out.retrieval_calls(), 1);
        assert!(out.answer.abstained);
    }
}
