//! The methods a config can name: `[method]` with `kind = "…"` and that method's own
//! fields (a field of another method is an error naming it). Adding a method is one file
//! in `method/` with its parameters and its loop, and one variant here.

use super::{adaptive, agentic, closed_book, flare, ircot, iter_retgen, self_ask};
use crate::text::{template_pieces, TemplatePiece};
use crate::{Error, Result};
use serde::{Deserialize, Serialize};

/// A method and its parameters (`[method]`; without the section, `naive`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum MethodSpec {
    /// Retrieve with the question, read once.
    Naive,
    /// No retrieval: the model answers from what it knows (adaptive's first turn alone).
    ClosedBook(closed_book::ClosedBook),
    /// Closed-book first, retrieval when unsure, closed-book fallback on abstention.
    Adaptive(adaptive::Adaptive),
    /// Retrieval with the question and the previous answer, repeated.
    IterRetgen(iter_retgen::IterRetgen),
    /// Interleaved retrieval and chain-of-thought.
    Ircot(ircot::Ircot),
    /// Follow-up questions, each retrieved and read.
    SelfAsk(self_ask::SelfAsk),
    /// Active retrieval for low-probability sentences.
    Flare(flare::Flare),
    /// `<search>` / `<answer>` loop with a search budget.
    Agentic(agentic::Agentic),
}

impl MethodSpec {
    /// The `kind` as written in a config.
    pub fn kind(&self) -> &'static str {
        match self {
            MethodSpec::Naive => "naive",
            MethodSpec::ClosedBook(_) => "closed-book",
            MethodSpec::Adaptive(_) => "adaptive",
            MethodSpec::IterRetgen(_) => "iter-retgen",
            MethodSpec::Ircot(_) => "ircot",
            MethodSpec::SelfAsk(_) => "self-ask",
            MethodSpec::Flare(_) => "flare",
            MethodSpec::Agentic(_) => "agentic",
        }
    }

    /// The method's own prompt file (`prompt`; `None`: none, or the built-in one).
    pub fn prompt_file(&self) -> Option<&str> {
        let p = match self {
            MethodSpec::Naive | MethodSpec::IterRetgen(_) => return None,
            MethodSpec::ClosedBook(p) => &p.prompt,
            MethodSpec::Adaptive(p) => &p.prompt,
            MethodSpec::Ircot(p) => &p.prompt,
            MethodSpec::SelfAsk(p) => &p.prompt,
            MethodSpec::Flare(p) => &p.prompt,
            MethodSpec::Agentic(p) => &p.prompt,
        };
        (!p.trim().is_empty()).then_some(p.as_str())
    }

    /// The method's own prompt file, to rewrite (a relative path made relative to the
    /// config's folder).
    pub fn prompt_file_mut(&mut self) -> Option<&mut String> {
        match self {
            MethodSpec::Naive | MethodSpec::IterRetgen(_) => None,
            MethodSpec::ClosedBook(p) => Some(&mut p.prompt),
            MethodSpec::Adaptive(p) => Some(&mut p.prompt),
            MethodSpec::Ircot(p) => Some(&mut p.prompt),
            MethodSpec::SelfAsk(p) => Some(&mut p.prompt),
            MethodSpec::Flare(p) => Some(&mut p.prompt),
            MethodSpec::Agentic(p) => Some(&mut p.prompt),
        }
    }

    /// The placeholders the method's prompt must hold.
    pub fn prompt_slots(&self) -> &'static [&'static str] {
        match self {
            MethodSpec::Naive | MethodSpec::IterRetgen(_) => &[],
            MethodSpec::ClosedBook(_)
            | MethodSpec::Adaptive(_)
            | MethodSpec::SelfAsk(_)
            | MethodSpec::Agentic(_) => &["question"],
            MethodSpec::Ircot(_) | MethodSpec::Flare(_) => &["question", "passages"],
        }
    }

    /// Whether the method prompts the reader's model directly (it then needs a reader that
    /// generates).
    pub fn generates(&self) -> bool {
        self.default_prompt().is_some()
    }

    /// The built-in prompt (`None` for methods without one).
    pub fn default_prompt(&self) -> Option<&'static str> {
        match self {
            MethodSpec::Naive | MethodSpec::IterRetgen(_) => None,
            MethodSpec::ClosedBook(_) => Some(closed_book::PROMPT),
            MethodSpec::Adaptive(_) => Some(adaptive::PROMPT),
            MethodSpec::Ircot(_) => Some(ircot::PROMPT),
            MethodSpec::SelfAsk(_) => Some(self_ask::PROMPT),
            MethodSpec::Flare(_) => Some(flare::PROMPT),
            MethodSpec::Agentic(_) => Some(agentic::PROMPT),
        }
    }

    /// Whether the method retrieves (every one but `closed-book`).
    pub fn retrieves(&self) -> bool {
        !matches!(self, MethodSpec::ClosedBook(_))
    }

    /// Check the parameters; errors name the field (`method.<field>`).
    pub fn check(&self) -> Result<()> {
        match self {
            MethodSpec::Naive => Ok(()),
            MethodSpec::ClosedBook(p) => p.check(),
            MethodSpec::Adaptive(p) => p.check(),
            MethodSpec::IterRetgen(p) => p.check(),
            MethodSpec::Ircot(p) => p.check(),
            MethodSpec::SelfAsk(p) => p.check(),
            MethodSpec::Flare(p) => p.check(),
            MethodSpec::Agentic(p) => p.check(),
        }
    }

    /// Check a prompt text for this method: it holds every placeholder the method fills,
    /// and no other (`{{` / `}}` are literal braces). `what` names it in errors.
    pub fn check_prompt(&self, text: &str, what: &str) -> Result<()> {
        let mut found = Vec::new();
        for piece in template_pieces(text) {
            match piece {
                TemplatePiece::Slot(name) => {
                    if !self.prompt_slots().contains(&name) {
                        return Err(Error::param(
                            "method.prompt",
                            format!(
                                "{what}: unknown placeholder {{{name}}} (`{}` fills {}; write \
                                 {{{{ and }}}} for literal braces)",
                                self.kind(),
                                slots(self.prompt_slots())
                            ),
                        ));
                    }
                    found.push(name);
                }
                TemplatePiece::Unclosed(_) | TemplatePiece::LoneClose => {
                    return Err(Error::param(
                        "method.prompt",
                        format!("{what}: a lone brace (write {{{{ and }}}} for literal braces)"),
                    ))
                }
                _ => {}
            }
        }
        if let Some(missing) = self.prompt_slots().iter().find(|s| !found.contains(s)) {
            return Err(Error::param(
                "method.prompt",
                format!(
                    "{what}: no {{{missing}}} (`{}` fills {})",
                    self.kind(),
                    slots(self.prompt_slots())
                ),
            ));
        }
        Ok(())
    }
}

fn slots(s: &[&str]) -> String {
    s.iter()
        .map(|n| format!("{{{n}}}"))
        .collect::<Vec<_>>()
        .join(" and ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct Wrap {
        method: MethodSpec,
    }

    fn parse(toml_text: &str) -> std::result::Result<MethodSpec, String> {
        toml::from_str::<Wrap>(toml_text)
            .map(|w| w.method)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn each_kind_parses_with_its_defaults_and_refuses_other_fields() {
        for kind in [
            "naive",
            "closed-book",
            "adaptive",
            "iter-retgen",
            "ircot",
            "self-ask",
            "flare",
            "agentic",
        ] {
            let m = parse(&format!("[method]\nkind = \"{kind}\"\n")).unwrap();
            assert_eq!(m.kind(), kind);
            m.check().unwrap();
            if let Some(p) = m.default_prompt() {
                m.check_prompt(p, "built-in").unwrap();
            }
        }
        let m =
            parse("[method]\nkind = \"adaptive\"\nthreshold = 0.3\nfallback = false\n").unwrap();
        let MethodSpec::Adaptive(a) = &m else {
            panic!()
        };
        assert_eq!((a.threshold, a.fallback), (0.3, false));
        let e = parse("[method]\nkind = \"adaptive\"\nmax_searches = 3\n").unwrap_err();
        assert!(e.contains("max_searches"), "{e}");
        let e = parse("[method]\nkind = \"nope\"\n").unwrap_err();
        assert!(e.contains("nope"), "{e}");
    }

    #[test]
    fn checks_name_the_field() {
        let m = parse("[method]\nkind = \"adaptive\"\nthreshold = 1.5\n").unwrap();
        assert!(m
            .check()
            .unwrap_err()
            .to_string()
            .contains("method.threshold"));
        let m = parse("[method]\nkind = \"agentic\"\nmax_searches = 0\n").unwrap();
        assert!(m
            .check()
            .unwrap_err()
            .to_string()
            .contains("method.max_searches"));
        let m = parse("[method]\nkind = \"ircot\"\nmax_steps = 0\n").unwrap();
        assert!(m
            .check()
            .unwrap_err()
            .to_string()
            .contains("method.max_steps"));
        let m = parse("[method]\nkind = \"iter-retgen\"\niterations = 0\n").unwrap();
        assert!(m
            .check()
            .unwrap_err()
            .to_string()
            .contains("method.iterations"));
    }

    #[test]
    fn prompts_need_their_placeholders_and_no_others() {
        let m = parse("[method]\nkind = \"ircot\"\n").unwrap();
        let e = m
            .check_prompt("Q: {question}", "p.txt")
            .unwrap_err()
            .to_string();
        assert!(e.contains("no {passages}") && e.contains("p.txt"), "{e}");
        let e = m
            .check_prompt("{passages} {question} {k}", "p.txt")
            .unwrap_err()
            .to_string();
        assert!(e.contains("{k}"), "{e}");
        m.check_prompt("{passages} {question} {{literal}}", "p.txt")
            .unwrap();
    }
}
