//! IRCoT (Trivedi et al., 2023): interleave retrieval with chain-of-thought. The model
//! writes one reasoning sentence at a time over the passages found so far; each sentence
//! that does not yet state the answer is the next query.
//!
//! 1. Retrieve with the question.
//! 2. The model continues its reasoning ([`PROMPT`]: the passages, the question, the
//!    sentences so far as the start of its turn); the first sentence of what it writes is
//!    kept.
//! 3. A sentence holding `So the answer is` ends the loop; the text after it is the answer
//!    (FlashRAG's reading of IRCoT; the paper's own variant reads the collected passages
//!    with a separate reader). Otherwise the sentence is retrieved for, new passages are added (at
//!    most `max_passages` in all), and the loop goes on, for at most `max_steps` sentences.
//! 4. Without a stated answer, the reader answers over every passage found.

use super::lm::LmRequest;
use super::recorder::at_least_one;
use super::recorder::{after_marker, first_sentence, format_docs, Recorder};
use crate::read::Context;
use crate::text::fill_placeholders;
use crate::Result;
use serde::{Deserialize, Serialize};

/// The built-in reasoning prompt.
pub const PROMPT: &str = "Use the documents to answer the question. Think step by step, one \
short sentence at a time. When you know the answer, write a last sentence \"So the answer \
is: <short answer>.\"\n\n{passages}\n\nQuestion: {question}";

/// Parameters of `kind = "ircot"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Ircot {
    /// Most reasoning sentences (each but the last is followed by a retrieval). Default 4.
    pub max_steps: usize,
    /// Most passages shown to the model (first found first). Default 10.
    pub max_passages: usize,
    /// The reasoning prompt file (`{passages}`, `{question}`); empty = the built-in one.
    pub prompt: String,
    /// Most tokens per sentence. Default 64.
    pub max_new_tokens: usize,
}

impl Default for Ircot {
    fn default() -> Self {
        Ircot {
            max_steps: 4,
            max_passages: 10,
            prompt: String::new(),
            max_new_tokens: 64,
        }
    }
}

impl Ircot {
    pub(crate) fn check(&self) -> Result<()> {
        at_least_one("method.max_steps", self.max_steps)?;
        at_least_one("method.max_passages", self.max_passages)?;
        at_least_one("method.max_new_tokens", self.max_new_tokens)
    }
}

/// Run the method (see the [module docs](self)); returns the answer and its abstention.
pub(crate) fn run(
    p: &Ircot,
    template: &str,
    question: &str,
    rec: &mut Recorder<'_>,
) -> Result<(String, bool)> {
    let mut shown: Vec<Context> = Vec::new();
    let add = |found: Vec<Context>, shown: &mut Vec<Context>| {
        for c in found {
            if shown.len() < p.max_passages && !shown.iter().any(|s| s.id == c.id) {
                shown.push(c);
            }
        }
    };
    let found = rec.search(question, "question")?;
    add(found, &mut shown);
    let mut chain: Vec<String> = Vec::new();
    for step in 0..p.max_steps {
        // No trailing space: the model's next word brings its own.
        let prefix = chain.join(" ");
        rec.show(&shown);
        let c = rec.generate(
            "ircot",
            &LmRequest {
                user: fill_placeholders(
                    template,
                    &[("passages", &format_docs(&shown)), ("question", question)],
                ),
                assistant_prefix: prefix,
                max_new_tokens: p.max_new_tokens,
                stop: vec!["\n".into()],
            },
            "reason",
        )?;
        let sentence = first_sentence(&c.text).to_string();
        if sentence.is_empty() {
            break;
        }
        chain.push(sentence.clone());
        if let Some(answer) = after_marker(&sentence, "so the answer is") {
            let answer = answer.trim_start_matches(':').trim().to_string();
            let abstained = rec.abstains_text(&answer);
            return Ok((answer, abstained));
        }
        if step + 1 < p.max_steps {
            let found = rec.search(&sentence, "reasoning sentence")?;
            add(found, &mut shown);
        }
    }
    let a = rec.read(question, &shown, "answer")?;
    let abstained = rec.abstains(&a);
    Ok((a.text, abstained))
}

#[cfg(test)]
mod tests {
    use super::super::lm::ScriptedLm;
    use super::super::recorder::StepKind;
    use super::super::testing::*;
    use super::*;

    fn docs() -> impl FnMut(&str) -> Result<Vec<Context>> {
        corpus_search(&[
            ("austria", "capital of austria = Vienna"),
            ("vienna", "river of vienna = Danube"),
        ])
    }

    #[test]
    fn each_sentence_is_the_next_query_until_the_answer_is_stated() {
        let mut search = docs();
        let mut lm = ScriptedLm::new(
            &[
                "The capital of Austria is Vienna. Extra text",
                "The Danube flows through Vienna.",
                "So the answer is: the Danube.",
            ],
            0.9,
        );
        let out = run_scripted(&mut search, Some(&mut lm), |rec| {
            run(
                &Ircot::default(),
                PROMPT,
                "Which river flows through the capital of Austria?",
                rec,
            )
        })
        .unwrap();
        assert_eq!(out.answer.text, "the Danube");
        let kinds: Vec<StepKind> = out.steps.iter().map(|s| s.kind).collect();
        use StepKind::*;
        assert_eq!(
            kinds,
            [Retrieve, Generate, Retrieve, Generate, Retrieve, Generate]
        );
        assert_eq!(
            out.steps[2].query.as_deref(),
            Some("The capital of Austria is Vienna.")
        );
        // The second prompt shows both passages and continues the chain.
        assert!(lm.requests[1]
            .user
            .contains("Doc 2 river of vienna = Danube"));
        assert_eq!(
            lm.requests[1].assistant_prefix,
            "The capital of Austria is Vienna."
        );
        assert_eq!(out.answer.passage_ids, ["austria", "vienna"]);
    }

    #[test]
    fn without_a_stated_answer_the_reader_answers_over_every_passage() {
        let mut search = docs();
        let mut lm = ScriptedLm::new(&["Austria is in Europe.", "Vienna is old."], 0.9);
        let out = run_scripted(&mut search, Some(&mut lm), |rec| {
            run(
                &Ircot {
                    max_steps: 2,
                    ..Ircot::default()
                },
                PROMPT,
                "Which river flows through the capital of Austria?",
                rec,
            )
        })
        .unwrap();
        // Two sentences, one retrieval between them (none after the last), then the read.
        assert_eq!(out.retrieval_calls(), 2);
        assert_eq!(out.steps.last().unwrap().kind, StepKind::Read);
        assert_eq!(out.answer.text, "Vienna");
        assert_eq!(lm.remaining(), 0);
    }
}
