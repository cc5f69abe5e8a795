//! A toy corpus, reader and runner for the methods' control-flow tests.
use super::lm::{Lm, ScriptedLm};
use super::recorder::{MethodAnswer, Recorder, Search, Tools};
use crate::read::{Answer, Context, Reader, Usage};
use crate::Result;

/// Run one method's loop `f` with `tools`, as `method::run` does.
pub fn run_with(
    tools: Tools<'_>,
    f: impl FnOnce(&mut Recorder<'_>) -> Result<(String, bool)>,
) -> Result<MethodAnswer> {
    let mut rec = Recorder::new(tools);
    let (text, abstained) = f(&mut rec)?;
    Ok(rec.finish(text, abstained))
}

/// Run one method's loop `f` over `search` with [`FirstFact`] reading, `lm` (if any)
/// generating and [`not_found`] deciding abstentions.
pub fn run_scripted(
    search: &mut dyn Search,
    lm: Option<&mut ScriptedLm>,
    f: impl FnOnce(&mut Recorder<'_>) -> Result<(String, bool)>,
) -> Result<MethodAnswer> {
    let mut reader = FirstFact;
    run_with(
        Tools {
            search,
            reader: &mut reader,
            lm: lm.map(|l| l as &mut dyn Lm),
            abstains: &not_found,
        },
        f,
    )
}

/// Passages found by any query containing their key word (`id` = the word).
pub fn corpus_search(docs: &[(&str, &str)]) -> impl FnMut(&str) -> Result<Vec<Context>> {
    let docs: Vec<(String, String)> = docs
        .iter()
        .map(|(k, t)| (k.to_string(), t.to_string()))
        .collect();
    move |q: &str| {
        let q = q.to_lowercase();
        Ok(docs
            .iter()
            .filter(|(k, _)| q.contains(k.as_str()))
            .map(|(k, t)| Context::new(k.clone(), t.clone()))
            .collect())
    }
}

/// A reader that answers with the text after `=` in the first passage, or "Not found".
pub struct FirstFact;

impl Reader for FirstFact {
    fn name(&self) -> &str {
        "first-fact"
    }
    fn read(&mut self, _question: &str, passages: &[Context]) -> Result<Answer> {
        let text = passages
            .first()
            .and_then(|p| p.text.split('=').nth(1))
            .map_or("Not found".to_string(), |s| s.trim().to_string());
        Ok(Answer {
            abstained: text == "Not found",
            passage_ids: passages.iter().map(|p| p.id.clone()).collect(),
            text,
            usage: Usage {
                prompt_tokens: 10,
                generated_tokens: 2,
                ..Usage::default()
            },
            ..Answer::default()
        })
    }
}

/// The abstention rule of the tests: "Not found" or empty.
pub fn not_found(a: &Answer) -> bool {
    a.text.trim().is_empty() || a.text.trim().eq_ignore_ascii_case("not found")
}
