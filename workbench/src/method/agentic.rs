//! An agentic search loop in Search-R1's format: the model reasons, writes
//! `<search> query </search>` when it needs to look something up, is given the results as
//! `<information>…</information>` and goes on, and ends with `<answer> … </answer>`.
//! Models trained for the format (Search-R1, R1-Searcher) expect their own prompt: point
//! `prompt` at it; [`PROMPT`] explains the tags to an instruction-tuned model.
//!
//! Each model turn is generated up to `</search>` or `</answer>`. A turn that opens
//! `<search>` is retrieved for while searches remain (`max_searches`), and the
//! transcript goes on with the passages as `Doc i(Title: …) text` lines (Search-R1's
//! layout). A turn with `<answer>` ends the loop; so does a turn with neither. When the
//! loop ends without an answer, `<answer>` is appended and the model completes it (its
//! first line with text is the answer).

use super::lm::LmRequest;
use super::recorder::at_least_one;
use super::recorder::Recorder;
use crate::read::Context;
use crate::text::fill_placeholders;
use crate::Result;
use serde::{Deserialize, Serialize};

/// The built-in prompt.
pub const PROMPT: &str = "Answer the question. Think inside <think> </think>. When you lack a \
fact, search for it by writing <search> your query </search>: the results come back between \
<information> and </information>, and you may search again. When you know the answer, write \
it inside <answer> </answer> as a short phrase, for example <answer> Vienna </answer>.\n\n\
Question: {question}";

/// Parameters of `kind = "agentic"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Agentic {
    /// Most searches per question. Default 4.
    pub max_searches: usize,
    /// Passages per search (at most the retrieval's own). Default 3 (Search-R1's).
    pub topk: usize,
    /// The prompt file (`{question}`); empty = the built-in one. Default empty.
    pub prompt: String,
    /// Most tokens per model turn. Default 256.
    pub max_new_tokens: usize,
}

impl Default for Agentic {
    fn default() -> Self {
        Agentic {
            max_searches: 4,
            topk: 3,
            prompt: String::new(),
            max_new_tokens: 256,
        }
    }
}

impl Agentic {
    pub(crate) fn check(&self) -> Result<()> {
        at_least_one("method.max_searches", self.max_searches)?;
        at_least_one("method.topk", self.topk)?;
        at_least_one("method.max_new_tokens", self.max_new_tokens)
    }
}

/// The text after the last `<tag>` in `text`, up to `</tag>` or the end, trimmed; `None`
/// without the opening tag.
pub fn tag_content(text: &str, tag: &str) -> Option<String> {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    let at = text.rfind(&open)? + open.len();
    let rest = &text[at..];
    let end = rest.find(&close).unwrap_or(rest.len());
    Some(rest[..end].trim().to_string())
}

/// Search-R1's information block for `passages`.
pub fn information(passages: &[Context]) -> String {
    let docs: Vec<String> = passages
        .iter()
        .enumerate()
        .map(|(i, c)| format!("Doc {}(Title: {}) {}", i + 1, c.title, c.text))
        .collect();
    format!("\n\n<information>{}</information>\n\n", docs.join("\n"))
}

/// Run the method (see the [module docs](self)); returns the answer and its abstention.
pub(crate) fn run(
    p: &Agentic,
    template: &str,
    question: &str,
    rec: &mut Recorder<'_>,
) -> Result<(String, bool)> {
    let user = fill_placeholders(template, &[("question", question)]);
    let mut transcript = String::new();
    let mut searches = 0;
    let stop = vec!["</search>".to_string(), "</answer>".to_string()];
    loop {
        let c = rec.generate(
            "agentic",
            &LmRequest {
                user: user.clone(),
                assistant_prefix: transcript.clone(),
                max_new_tokens: p.max_new_tokens,
                stop: stop.clone(),
            },
            "turn",
        )?;
        transcript.push_str(&c.text);
        let search_at = c.text.rfind("<search>");
        let answer_at = c.text.rfind("<answer>");
        if let Some(a) = answer_at {
            if search_at.is_none_or(|s| s < a) {
                let answer = tag_content(&c.text, "answer").unwrap_or_default();
                let abstained = answer.is_empty() || rec.abstains_text(&answer);
                return Ok((answer, abstained));
            }
        }
        match tag_content(&c.text, "search") {
            Some(query) if search_at.is_some() && searches < p.max_searches => {
                searches += 1;
                transcript.push_str("</search>");
                let mut found = rec.search(&query, "search")?;
                found.truncate(p.topk);
                rec.show(&found);
                transcript.push_str(&information(&found));
            }
            _ => break,
        }
    }
    transcript.push_str("<answer>");
    let c = rec.generate(
        "agentic",
        &LmRequest {
            user,
            assistant_prefix: transcript,
            max_new_tokens: p.max_new_tokens.min(64),
            stop: vec!["</answer>".into()],
        },
        "forced answer",
    )?;
    // The first line with text (a model may start its answer on a new line).
    let answer = c
        .text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("")
        .to_string();
    let abstained = answer.is_empty() || rec.abstains_text(&answer);
    Ok((answer, abstained))
}

#[cfg(test)]
mod tests {
    use super::super::lm::ScriptedLm;
    use super::super::recorder::StepKind;
    use super::super::testing::*;
    use super::*;

    fn agentic(lm: &mut ScriptedLm, p: Agentic) -> super::super::recorder::MethodAnswer {
        let mut search = corpus_search(&[
            ("austria", "capital of austria = Vienna"),
            ("vienna", "river of vienna = Danube"),
        ]);
        run_scripted(&mut search, Some(lm), |rec| {
            run(
                &p,
                PROMPT,
                "Which river flows through the capital of Austria?",
                rec,
            )
        })
        .unwrap()
    }

    #[test]
    fn searches_are_answered_with_information_until_the_answer() {
        let mut lm = ScriptedLm::new(
            &[
                "<think>I need the capital.</think> <search> capital of Austria ",
                "<search>river of Vienna in Austria",
                "<think>The Danube.</think> <answer> Danube ",
            ],
            0.9,
        );
        let out = agentic(
            &mut lm,
            Agentic {
                topk: 1,
                ..Agentic::default()
            },
        );
        assert_eq!(out.answer.text, "Danube");
        // Search 2 found both passages; topk = 1 shows the model the first, and only
        // passages the model saw are the answer's.
        assert_eq!(out.steps[3].passage_ids, ["austria", "vienna"]);
        assert!(!lm.requests[2].assistant_prefix.contains("Doc 2"));
        assert_eq!(out.answer.passage_ids, ["austria"]);
        use StepKind::*;
        let kinds: Vec<StepKind> = out.steps.iter().map(|s| s.kind).collect();
        assert_eq!(kinds, [Generate, Retrieve, Generate, Retrieve, Generate]);
        assert_eq!(out.steps[1].query.as_deref(), Some("capital of Austria"));
        let second = &lm.requests[1].assistant_prefix;
        assert!(
            second.ends_with(
                "<search> capital of Austria </search>\n\n<information>Doc 1(Title: ) capital of austria = Vienna</information>\n\n"
            ),
            "{second}"
        );
        assert_eq!(lm.requests[1].stop, ["</search>", "</answer>"]);
    }

    #[test]
    fn the_search_budget_ends_in_a_forced_answer() {
        let mut lm = ScriptedLm::new(
            &[
                "<search> austria",
                "<search> vienna",
                "<search> more",
                " Danube",
            ],
            0.9,
        );
        let out = agentic(
            &mut lm,
            Agentic {
                max_searches: 2,
                ..Agentic::default()
            },
        );
        assert_eq!(out.retrieval_calls(), 2);
        assert_eq!(out.answer.text, "Danube");
        assert!(lm.requests[3]
            .assistant_prefix
            .ends_with("<search> more<answer>"));
        assert_eq!(lm.remaining(), 0);
    }
}
