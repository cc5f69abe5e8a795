//! RAG methods: control flows that decide whether, when and with what query to retrieve,
//! between a question and its answer. One file per method, each with its parameters and its
//! loop; [`MethodSpec`] lists them (`[method]` in a pipeline config, `kind = "…"`).
//!
//! | `kind` | what it does | model calls |
//! |---|---|---|
//! | `naive` | retrieve with the question, read once | reader |
//! | `closed-book` | no retrieval: the model answers from what it knows (adaptive's first turn alone) | model |
//! | `adaptive` | answer closed-book first; retrieve and read only when that answer's confidence is low or it abstains; fall back to the closed-book answer when the read abstains | model, reader |
//! | `iter-retgen` | retrieve with the question and the previous answer, read; repeat | reader |
//! | `ircot` | reason one sentence at a time over the passages, retrieving with each sentence | model (reader when no answer is stated) |
//! | `self-ask` | ask follow-up questions, each retrieved and read, then the final answer | model, reader |
//! | `flare` | generate the answer a sentence at a time; a sentence with a low-probability token is retrieved for (its confident words as the query) and generated again | model |
//! | `agentic` | the model writes `<search>…</search>` to search and `<answer>…</answer>` to answer (Search-R1's format), within a search budget | model |
//!
//! A method works with [`Tools`]: the pipeline's retrieval for one query ([`Search`]), its
//! reader ([`crate::read::Reader`], for "read these passages and answer", with the
//! pipeline's prompt and abstention rule), and the reader's language model prompted
//! directly ([`Lm`], greedy, with token log-probabilities), for the methods that generate
//! reasoning, queries or text of their own. Every call is a [`Step`] of the trace: its
//! query, the passages it returned or was given, the text, the tokens and the seconds.
//! [`MethodAnswer::passages`] holds every passage retrieved at any step: a question is a
//! retrieval miss only when none of them holds a gold answer.

pub mod adaptive;
pub mod agentic;
pub mod closed_book;
pub mod flare;
pub mod ircot;
pub mod iter_retgen;
pub mod lm;
pub mod recorder;
pub mod self_ask;
pub mod spec;
#[cfg(test)]
mod testing;

pub use lm::{Completion, Lm, LmRequest, ScriptedLm};
pub use recorder::{MethodAnswer, Recorder, Search, Step, StepKind, Tools};
pub use spec::MethodSpec;

use crate::Result;

/// Run `spec` on `question`.
///
/// Errors: a method that generates without a model in `tools` ([`Error::InvalidParam`]
/// naming `method.kind`); any retrieval, model or reader error.
/// `template` is the method's prompt text (the `prompt` file's, read by the caller), `None`
/// for its built-in one ([`MethodSpec::default_prompt`]).
pub fn run(
    spec: &MethodSpec,
    template: Option<&str>,
    question: &str,
    tools: Tools<'_>,
) -> Result<MethodAnswer> {
    let template = template.or(spec.default_prompt()).unwrap_or("");
    let mut rec = Recorder::new(tools);
    let (text, abstained) = match spec {
        MethodSpec::Naive => {
            let passages = rec.search(question, "question")?;
            let a = rec.read(question, &passages, "answer")?;
            let abstained = rec.abstains(&a);
            (a.text, abstained)
        }
        MethodSpec::ClosedBook(p) => closed_book::run(p, template, question, &mut rec)?,
        MethodSpec::Adaptive(p) => adaptive::run(p, template, question, &mut rec)?,
        MethodSpec::IterRetgen(p) => iter_retgen::run(p, question, &mut rec)?,
        MethodSpec::Ircot(p) => ircot::run(p, template, question, &mut rec)?,
        MethodSpec::SelfAsk(p) => self_ask::run(p, template, question, &mut rec)?,
        MethodSpec::Flare(p) => flare::run(p, template, question, &mut rec)?,
        MethodSpec::Agentic(p) => agentic::run(p, template, question, &mut rec)?,
    };
    Ok(rec.finish(text, abstained))
}

#[cfg(test)]
mod tests {
    use super::testing::*;
    use super::*;

    #[test]
    fn naive_retrieves_once_and_reads_once() {
        let mut search = corpus_search(&[("austria", "capital of austria = Vienna")]);
        let mut reader = FirstFact;
        let out = run(
            &MethodSpec::Naive,
            None,
            "What is the capital of Austria?",
            Tools {
                search: &mut search,
                reader: &mut reader,
                lm: None,
                abstains: &not_found,
            },
        )
        .unwrap();
        assert_eq!(out.answer.text, "Vienna");
        assert!(!out.answer.abstained);
        let kinds: Vec<StepKind> = out.steps.iter().map(|s| s.kind).collect();
        assert_eq!(kinds, [StepKind::Retrieve, StepKind::Read]);
        assert_eq!(out.retrieval_calls(), 1);
        assert_eq!(out.answer.passage_ids, ["austria"]);
        assert_eq!(out.answer.usage.prompt_tokens, 10);
    }

    #[test]
    fn a_generating_method_without_a_model_names_the_field() {
        let mut search = corpus_search(&[]);
        let mut reader = FirstFact;
        let e = run(
            &MethodSpec::Agentic(Default::default()),
            None,
            "q?",
            Tools {
                search: &mut search,
                reader: &mut reader,
                lm: None,
                abstains: &not_found,
            },
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("method.kind") && e.contains("agentic"), "{e}");
    }
}
