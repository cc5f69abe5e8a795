//! Self-Ask with search (Press et al., 2023): the model decomposes the question into
//! follow-up questions; each is retrieved for and answered by the reader, and the answer
//! is written back as the intermediate answer, until the model states the final answer.
//!
//! The model's turn starts with `Are follow up questions needed here:` ([`PROMPT`] shows
//! one worked example) and is generated up to `Intermediate answer:`. The last
//! `Follow up:` line it wrote is retrieved for and read; `Intermediate answer: <the
//! reader's answer>` is appended and the model goes on. `So the final answer is:` ends the
//! loop. After `max_steps` follow-ups, or when the model writes neither, the model is
//! asked for the final answer directly.

use super::lm::LmRequest;
use super::recorder::at_least_one;
use super::recorder::{after_marker, Recorder};
use crate::text::fill_placeholders;
use crate::Result;
use serde::{Deserialize, Serialize};

/// The built-in prompt: one worked example, then the question.
pub const PROMPT: &str = "Answer the question. When it needs facts you have to look up first, \
ask them one at a time as follow-up questions, as in the example.\n\nQuestion: Which river \
flows through the capital of Austria?\nAre follow up questions needed here: Yes.\nFollow up: \
What is the capital of Austria?\nIntermediate answer: Vienna.\nFollow up: Which river flows \
through Vienna?\nIntermediate answer: The Danube.\nSo the final answer is: the Danube\n\n\
Question: {question}";

const START: &str = "Are follow up questions needed here:";
const FOLLOW_UP: &str = "Follow up:";
const INTERMEDIATE: &str = "Intermediate answer:";
const FINAL: &str = "So the final answer is:";

/// Parameters of `kind = "self-ask"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SelfAsk {
    /// Most follow-up questions (each one retrieval and one read). Default 4.
    pub max_steps: usize,
    /// The prompt file (`{question}`); empty = the built-in one. Default empty.
    pub prompt: String,
    /// Most tokens per model turn. Default 96.
    pub max_new_tokens: usize,
}

impl Default for SelfAsk {
    fn default() -> Self {
        SelfAsk {
            max_steps: 4,
            prompt: String::new(),
            max_new_tokens: 96,
        }
    }
}

impl SelfAsk {
    pub(crate) fn check(&self) -> Result<()> {
        at_least_one("method.max_steps", self.max_steps)?;
        at_least_one("method.max_new_tokens", self.max_new_tokens)
    }
}

/// Run the method (see the [module docs](self)); returns the answer and its abstention.
pub(crate) fn run(
    p: &SelfAsk,
    template: &str,
    question: &str,
    rec: &mut Recorder<'_>,
) -> Result<(String, bool)> {
    let user = fill_placeholders(template, &[("question", question)]);
    let mut transcript = START.to_string();
    let mut follow_ups = 0;
    loop {
        let c = rec.generate(
            "self-ask",
            &LmRequest {
                user: user.clone(),
                assistant_prefix: transcript.clone(),
                max_new_tokens: p.max_new_tokens,
                stop: vec![INTERMEDIATE.into(), "\nQuestion:".into()],
            },
            "decompose",
        )?;
        transcript.push_str(&c.text);
        if let Some(answer) = after_marker(&c.text, FINAL) {
            let abstained = rec.abstains_text(&answer);
            return Ok((answer, abstained));
        }
        let follow_up = after_marker(&c.text, FOLLOW_UP);
        match follow_up {
            Some(q) if follow_ups < p.max_steps => {
                follow_ups += 1;
                let passages = rec.search(&q, "follow-up")?;
                let a = rec.read(&q, &passages, "intermediate answer")?;
                let said = if rec.abstains(&a) {
                    "unknown".to_string()
                } else {
                    a.text.trim().to_string()
                };
                if !transcript.ends_with('\n') {
                    transcript.push('\n');
                }
                transcript.push_str(&format!("{INTERMEDIATE} {said}\n"));
            }
            _ => break,
        }
    }
    // No final answer stated: ask for it.
    if !transcript.ends_with('\n') {
        transcript.push('\n');
    }
    transcript.push_str(FINAL);
    let c = rec.generate(
        "self-ask",
        &LmRequest {
            user,
            assistant_prefix: transcript,
            max_new_tokens: p.max_new_tokens,
            stop: vec!["\n".into()],
        },
        "final answer",
    )?;
    let answer = c.text.trim().trim_end_matches('.').trim().to_string();
    let abstained = answer.is_empty() || rec.abstains_text(&answer);
    Ok((answer, abstained))
}

#[cfg(test)]
mod tests {
    use super::super::lm::ScriptedLm;
    use super::super::recorder::StepKind;
    use super::super::testing::*;
    use super::*;

    #[test]
    fn follow_ups_are_retrieved_read_and_written_back() {
        let mut search = corpus_search(&[
            ("austria", "capital of austria = Vienna"),
            ("vienna", "river of vienna = Danube"),
        ]);
        let mut lm = ScriptedLm::new(
            &[
                " Yes.\nFollow up: What is the capital of Austria?\n",
                "Follow up: Which river flows through Vienna?\n",
                "So the final answer is: the Danube.",
            ],
            0.9,
        );
        let out = run_scripted(&mut search, Some(&mut lm), |rec| {
            run(
                &SelfAsk::default(),
                PROMPT,
                "Which river flows through the capital of Austria?",
                rec,
            )
        })
        .unwrap();
        assert_eq!(out.answer.text, "the Danube");
        use StepKind::*;
        let kinds: Vec<StepKind> = out.steps.iter().map(|s| s.kind).collect();
        assert_eq!(
            kinds,
            [Generate, Retrieve, Read, Generate, Retrieve, Read, Generate]
        );
        assert_eq!(
            out.steps[1].query.as_deref(),
            Some("What is the capital of Austria?")
        );
        // The reader's answer is written back before the model goes on.
        assert!(lm.requests[1]
            .assistant_prefix
            .ends_with("What is the capital of Austria?\nIntermediate answer: Vienna\n"));
        assert!(lm.requests[2]
            .assistant_prefix
            .ends_with("Intermediate answer: Danube\n"));
    }

    #[test]
    fn the_budget_ends_in_a_direct_final_answer() {
        let mut search = corpus_search(&[]);
        let mut lm = ScriptedLm::new(
            &[
                " Yes.\nFollow up: Who?\n",
                "Follow up: Who again?\n",
                " Nobody.",
            ],
            0.9,
        );
        let out = run_scripted(&mut search, Some(&mut lm), |rec| {
            run(
                &SelfAsk {
                    max_steps: 1,
                    ..SelfAsk::default()
                },
                PROMPT,
                "Who?",
                rec,
            )
        })
        .unwrap();
        assert_eq!(out.retrieval_calls(), 1);
        assert_eq!(out.answer.text, "Nobody");
        assert!(lm.requests[2]
            .assistant_prefix
            .ends_with("So the final answer is:"));
        assert!(lm.requests[1]
            .assistant_prefix
            .contains("Intermediate answer: unknown"));
    }
}
