//! An LLM judge ([`LlmJudge`](self), feature `llm`): does a model, shown the question, the gold answers and the
//! prediction, say the prediction is correct?
//!
//! The judge's prompt is a template file (`data/prompts/judge.txt` by default) with
//! `{question}`, `{gold}` (the gold answers joined by ` | `) and `{answer}`; it is sent as
//! the user message with the judge model's chat template. The verdict is read from the
//! **first generated token**: P(Yes) = e^{l_Yes} / (e^{l_Yes} + e^{l_No}), the two logits of
//! the tokens `Yes` and `No` at the first position (each must be one token of the model's
//! vocabulary). No sampling: the same model, prompt and answer always give the same number.
//! A prediction counts as correct when P(Yes) is above a cut ([`says_yes`] is the one
//! place a cut is applied). The cut is `evaluation.judge_cut` when a config sets it, else
//! the judge's calibrated one ([`calibration`](super::calibration): chosen on labelled
//! predictions, recorded per judge model and prompt text), else [`DEFAULT_CUT`] (0.5,
//! P(Yes) > P(No)); every run records the cut it used and where it came from. An
//! abstention (empty prediction) is judged incorrect without asking. Runs report the share
//! above the cut and the mean P(Yes), the graded score BERGEN reports for its LLM
//! evaluation.
//!
//! This is the scheme of BERGEN's LLM evaluation (its `config/evaluator/default_qa.yaml`:
//! the judge is shown the question, the golden answer and the generated answer, generates
//! one token, and its `Yes` / `No` logits give the score), with this workbench's own prompt
//! and model. It is not a rating scale, and it needs the gold answers.
//!
//! Two judges implement [`Judge`]: [`LlmJudge`] on a GGUF loaded in this process, and
//! [`ServerJudge`] on any OpenAI-compatible chat server that returns log-probabilities
//! (llama.cpp's `llama-server`, vLLM, a hosted API), so a judge stronger than the reader can
//! be used. The server judge asks for one token with `logprobs` and the 20 most likely
//! first tokens, and computes the same two-token P(Yes) from the log-probabilities of
//! `Yes` and `No` among them (a normalisation constant common to both cancels out).
//!
//! A small judge is weak. [`cohen_kappa`] of its verdicts against the token-bounded
//! containment Match (`answer_found`) is reported with every judged run, over the
//! questions the reader answered: an abstention is a "no" on both sides by construction,
//! so counting abstentions would inflate the agreement.

#[cfg(feature = "llm")]
use crate::read::generative::{ChatMessage, Llm, SharedLlm};
use crate::{Error, Result};

/// The judge's default prompt template, relative to the project root.
pub const DEFAULT_PROMPT: &str = "data/prompts/judge.txt";

/// The P(Yes) cut of a judge without a calibration: P(Yes) > P(No).
pub const DEFAULT_CUT: f64 = 0.5;

/// Whether a P(Yes) is a "correct" verdict: strictly above `cut`; `None` (not judged)
/// is not.
pub fn says_yes(p_yes: Option<f64>, cut: f64) -> bool {
    p_yes.is_some_and(|p| p > cut)
}

/// Something that gives a prediction's P(Yes) of being correct. See the
/// [module docs](self).
pub trait Judge {
    /// The judge's name (its model).
    fn name(&self) -> &str;

    /// P(Yes) for `answer` to `question` with `golds`; 0 for an empty answer (an
    /// abstention), without asking.
    fn p_yes(&self, question: &str, golds: &[String], answer: &str) -> Result<f64>;
}

/// Check a judge prompt template: it has `{question}`, `{gold}` and `{answer}`.
pub fn check_template(template: &str) -> Result<()> {
    for key in ["{question}", "{gold}", "{answer}"] {
        if !template.contains(key) {
            return Err(Error::param(
                "judge prompt",
                format!("the template has no {key}"),
            ));
        }
    }
    Ok(())
}

/// The user message of one judgement: `template` with `{question}`, `{gold}` (the golds
/// joined by ` | `) and `{answer}` filled in one pass.
pub fn judge_message(template: &str, question: &str, golds: &[String], answer: &str) -> String {
    crate::text::fill_placeholders(
        template.strip_suffix('\n').unwrap_or(template),
        &[
            ("question", question.trim()),
            ("gold", &golds.join(" | ")),
            ("answer", answer.trim()),
        ],
    )
}

/// P(Yes) = e^y / (e^y + e^n) from the two scores (logits or log-probabilities) of `Yes`
/// and `No`, computed stably.
pub fn two_way_p_yes(y: f64, n: f64) -> f64 {
    let top = y.max(n);
    let (ey, en) = ((y - top).exp(), (n - top).exp());
    ey / (ey + en)
}

/// An LLM judge over a loaded GGUF model. See the [module docs](self).
#[cfg(feature = "llm")]
#[derive(Debug, Clone)]
pub struct LlmJudge {
    llm: SharedLlm,
    template: String,
    yes: u32,
    no: u32,
    name: String,
}

/// The one token `text` is for `llm`.
#[cfg(feature = "llm")]
fn single_token(llm: &Llm, text: &str) -> Result<u32> {
    let ids = llm.tokenize(text, false)?;
    match ids.as_slice() {
        [id] => Ok(*id),
        _ => Err(Error::param(
            "judge",
            format!(
                "`{text}` is {} tokens for {}: the judge reads one token",
                ids.len(),
                llm.name()
            ),
        )),
    }
}

#[cfg(feature = "llm")]
impl LlmJudge {
    /// A judge on `llm` with the prompt `template` (its text).
    ///
    /// Errors: a template without `{question}`, `{gold}` or `{answer}`; a model whose
    /// vocabulary has no single token for `Yes` or `No`.
    pub fn new(llm: SharedLlm, template: &str) -> Result<Self> {
        check_template(template)?;
        let (yes, no, name) = {
            let m = llm.lock()?;
            (
                single_token(&m, "Yes")?,
                single_token(&m, "No")?,
                m.name().to_string(),
            )
        };
        Ok(LlmJudge {
            llm,
            template: template.to_string(),
            yes,
            no,
            name,
        })
    }

    /// The judge model's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The user message for one judgement.
    pub fn prompt(&self, question: &str, golds: &[String], answer: &str) -> String {
        judge_message(&self.template, question, golds, answer)
    }

    /// P(Yes) of the first token for `answer` to `question` with `golds`; 0 for an empty
    /// answer (an abstention), without asking.
    pub fn p_yes(&self, question: &str, golds: &[String], answer: &str) -> Result<f64> {
        if answer.trim().is_empty() {
            return Ok(0.0);
        }
        let user = self.prompt(question, golds, answer);
        let mut m = self.llm.lock()?;
        let chat = m.render_chat(&[ChatMessage::user(user)], true)?;
        let ids = m.tokenize(&chat, true)?;
        let logits = m.next_token_logits(&ids)?;
        let (y, n) = match (logits.get(self.yes as usize), logits.get(self.no as usize)) {
            (Some(&y), Some(&n)) => (y as f64, n as f64),
            _ => {
                return Err(Error::param(
                    "judge",
                    "the Yes / No token is outside the model's logits",
                ))
            }
        };
        Ok(two_way_p_yes(y, n))
    }
}

#[cfg(feature = "llm")]
impl Judge for LlmJudge {
    fn name(&self) -> &str {
        LlmJudge::name(self)
    }

    fn p_yes(&self, question: &str, golds: &[String], answer: &str) -> Result<f64> {
        LlmJudge::p_yes(self, question, golds, answer)
    }
}

/// How many first-token alternatives [`ServerJudge`] asks for.
pub const SERVER_TOP_LOGPROBS: usize = 20;

/// An LLM judge on an OpenAI-compatible chat server that returns log-probabilities. See
/// the [module docs](self).
#[derive(Debug)]
pub struct ServerJudge {
    client: crate::read::openai::OpenAiReader,
    template: String,
}

impl ServerJudge {
    /// A judge on the server at `base_url` (up to `/v1`) asking for `model`, with the API
    /// key in the environment variable `api_key_env` (empty: none) and the prompt
    /// `template` (its text).
    ///
    /// Errors: a template without `{question}`, `{gold}` or `{answer}`; the server options'
    /// errors ([`OpenAiReader::new`](crate::read::openai::OpenAiReader::new)).
    pub fn new(base_url: &str, model: &str, api_key_env: &str, template: &str) -> Result<Self> {
        check_template(template)?;
        let client = crate::read::openai::OpenAiReader::new(crate::read::openai::OpenAiOptions {
            base_url: base_url.into(),
            model: model.into(),
            api_key_env: api_key_env.into(),
            // The reader's own template is not used: the judge sends its own message.
            prompt: "{question}{passages}".into(),
            passage: "{text}".into(),
            max_tokens: 1,
            temperature: 0.0,
            ..Default::default()
        })?;
        Ok(ServerJudge {
            client,
            template: template.to_string(),
        })
    }
}

impl Judge for ServerJudge {
    fn name(&self) -> &str {
        crate::read::Reader::name(&self.client)
    }

    /// P(Yes) from the first token's log-probabilities of `Yes` and `No`. Tokens are
    /// compared after removing a leading space marker (`" Yes"`, `"ĠYes"`, `"▁Yes"`); the
    /// variants of one word are added up (log-sum-exp). A word the server did not list
    /// among its [`SERVER_TOP_LOGPROBS`] alternatives is given the smallest listed
    /// log-probability, an upper bound on its own, so the P(Yes) is then a bound (a lower
    /// one when `No` is missing, an upper one when `Yes` is) and never a saturated 0 or 1.
    ///
    /// Errors ([`Error::Server`]): no log-probabilities in the response, neither word
    /// listed (the message names the tokens that were), or values that are not
    /// log-probabilities (positive, or adding up to more than 1).
    fn p_yes(&self, question: &str, golds: &[String], answer: &str) -> Result<f64> {
        if answer.trim().is_empty() {
            return Ok(0.0);
        }
        use crate::read::openai::{ChatParams, Message};
        let msgs = [Message {
            role: "user".into(),
            content: judge_message(&self.template, question, golds, answer),
        }];
        let params = ChatParams {
            temperature: 0.0,
            top_p: 1.0,
            max_tokens: 1,
            seed: 0,
            stop: Vec::new(),
            top_logprobs: Some(SERVER_TOP_LOGPROBS),
        };
        let c = self.client.chat(&msgs, &params, "judge")?;
        let err = |message: String| Error::Server {
            url: self.client.url().to_string(),
            message,
        };
        p_yes_from_top_logprobs(&c.first_top_logprobs).map_err(err)
    }
}

/// The two-way P(Yes) of [`ServerJudge::p_yes`] from a first token's alternatives
/// (token text, log-probability); `Err` with the reason otherwise.
pub fn p_yes_from_top_logprobs(alternatives: &[(String, f64)]) -> std::result::Result<f64, String> {
    if alternatives.is_empty() {
        return Err(
            "the judge's response has no log-probabilities (does the server support \
                    `logprobs` / `top_logprobs`?)"
                .into(),
        );
    }
    let mass: f64 = alternatives.iter().map(|(_, lp)| lp.exp()).sum();
    if alternatives
        .iter()
        .any(|(_, lp)| !lp.is_finite() && *lp != f64::NEG_INFINITY || *lp > 0.0)
        || mass > 1.0 + 1e-6
    {
        return Err(format!(
            "the server's `logprob` values are not log-probabilities (positive, or adding up \
             to {mass:.3} > 1): {alternatives:?}"
        ));
    }
    let word = |w: &str| -> Option<f64> {
        let lps: Vec<f64> = alternatives
            .iter()
            .filter(|(t, _)| {
                t.trim_start_matches([' ', '\u{120}', '\u{2581}'])
                    .trim_end()
                    == w
            })
            .map(|(_, lp)| *lp)
            .collect();
        let top = lps.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        (!lps.is_empty()).then(|| top + lps.iter().map(|lp| (lp - top).exp()).sum::<f64>().ln())
    };
    let floor = alternatives
        .iter()
        .map(|(_, lp)| *lp)
        .fold(f64::INFINITY, f64::min);
    match (word("Yes"), word("No")) {
        (Some(y), Some(n)) => Ok(two_way_p_yes(y, n)),
        (Some(y), None) => Ok(two_way_p_yes(y, floor)),
        (None, Some(n)) => Ok(two_way_p_yes(floor, n)),
        (None, None) => Err(format!(
            "neither `Yes` nor `No` among the first token's {} alternatives: {:?}",
            alternatives.len(),
            alternatives
                .iter()
                .map(|(t, _)| t.as_str())
                .collect::<Vec<_>>()
        )),
    }
}

/// Cohen's kappa of two raters' yes/no verdicts on the same items: (p_o − p_e) / (1 − p_e),
/// with p_o the observed agreement and p_e the agreement expected from each rater's own
/// rate of yes. `None` when it is undefined (no item, or both raters give one verdict to
/// every item, p_e = 1).
///
/// Errors: lists of different lengths.
pub fn cohen_kappa(a: &[bool], b: &[bool]) -> Result<Option<f64>> {
    if a.len() != b.len() {
        return Err(Error::param(
            "kappa",
            format!("{} verdicts against {}", a.len(), b.len()),
        ));
    }
    if a.is_empty() {
        return Ok(None);
    }
    let n = a.len() as f64;
    let agree = a.iter().zip(b).filter(|(x, y)| x == y).count() as f64 / n;
    let pa = a.iter().filter(|x| **x).count() as f64 / n;
    let pb = b.iter().filter(|x| **x).count() as f64 / n;
    let expected = pa * pb + (1.0 - pa) * (1.0 - pb);
    if (1.0 - expected).abs() < 1e-12 {
        return Ok(None);
    }
    Ok(Some((agree - expected) / (1.0 - expected)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_way_p_yes_is_the_softmax_of_two_scores() {
        assert_eq!(two_way_p_yes(0.0, 0.0), 0.5);
        // e^2 / (e^2 + e^0)
        let want = 2f64.exp() / (2f64.exp() + 1.0);
        assert!((two_way_p_yes(2.0, 0.0) - want).abs() < 1e-15);
        // Shifting both (log-probabilities against logits) changes nothing.
        assert!((two_way_p_yes(-3.0, -5.0) - want).abs() < 1e-15);
        assert!((two_way_p_yes(1000.0, 998.0) - want).abs() < 1e-12);
        assert!((two_way_p_yes(0.0, 2.0) - (1.0 - want)).abs() < 1e-15);
    }

    #[test]
    fn server_log_probabilities_give_a_two_way_p_yes() {
        let alt = |v: &[(&str, f64)]| {
            v.iter()
                .map(|(t, l)| (t.to_string(), *l))
                .collect::<Vec<_>>()
        };
        let want = two_way_p_yes(-1.0, -2.0);
        let got = p_yes_from_top_logprobs(&alt(&[("No", -2.0), ("Yes", -1.0), ("The", -3.0)]));
        assert!((got.unwrap() - want).abs() < 1e-15);
        // Space markers of SentencePiece and byte-level BPE; variants add up.
        let got = p_yes_from_top_logprobs(&alt(&[(" Yes", -1.0), ("\u{120}No", -2.0)]));
        assert!((got.unwrap() - want).abs() < 1e-15);
        let both = (0.2f64 + 0.1).ln();
        let got = p_yes_from_top_logprobs(&alt(&[
            ("Yes", 0.2f64.ln()),
            ("\u{2581}Yes", 0.1f64.ln()),
            ("No", 0.3f64.ln()),
        ]));
        assert!((got.unwrap() - two_way_p_yes(both, 0.3f64.ln())).abs() < 1e-12);
        // One word missing: bounded by the smallest listed value, not saturated.
        let got = p_yes_from_top_logprobs(&alt(&[("Yes", -6.0), ("Paris", -0.1), ("The", -6.1)]))
            .unwrap();
        assert!(
            (got - two_way_p_yes(-6.0, -6.1)).abs() < 1e-15 && got < 0.6,
            "{got}"
        );
        // Neither, none, or probabilities in place of log-probabilities: errors.
        let e = p_yes_from_top_logprobs(&alt(&[("Paris", -0.2), ("The", -2.0)])).unwrap_err();
        assert!(e.contains("neither") && e.contains("Paris"), "{e}");
        assert!(p_yes_from_top_logprobs(&[])
            .unwrap_err()
            .contains("log-probabilities"));
        let e = p_yes_from_top_logprobs(&alt(&[("Yes", 0.7), ("No", 0.3)])).unwrap_err();
        assert!(e.contains("not log-probabilities"), "{e}");
        let e = p_yes_from_top_logprobs(&alt(&[("Yes", -0.1), ("No", -0.2)])).unwrap_err();
        assert!(e.contains("not log-probabilities"), "{e}");
    }

    #[test]
    fn judge_messages_fill_the_template_once() {
        let m = judge_message(
            "Q: {question}\nGold: {gold}\nA: {answer}\n",
            " Who? ",
            &["a".into(), "b".into()],
            "{gold}",
        );
        assert_eq!(m, "Q: Who?\nGold: a | b\nA: {gold}");
        assert!(check_template("{question} {gold}").is_err());
    }

    #[test]
    fn kappa_matches_hand_computed_values() {
        // 10 items: 7 agreements; a says yes 5 times, b 4 times.
        // p_o = 0.7, p_e = 0.5·0.4 + 0.5·0.6 = 0.5, kappa = 0.4.
        let a = [
            true, true, true, true, true, false, false, false, false, false,
        ];
        let b = [
            true, true, true, false, false, true, false, false, false, false,
        ];
        let k = cohen_kappa(&a, &b).unwrap().unwrap();
        assert!((k - 0.4).abs() < 1e-12, "{k}");
        assert_eq!(cohen_kappa(&a, &a).unwrap(), Some(1.0));
        let flipped: Vec<bool> = a.iter().map(|x| !x).collect();
        assert_eq!(cohen_kappa(&a, &flipped).unwrap(), Some(-1.0));
        assert_eq!(cohen_kappa(&[true, true], &[true, true]).unwrap(), None);
        assert_eq!(cohen_kappa(&[], &[]).unwrap(), None);
        assert!(cohen_kappa(&[true], &[]).is_err());
    }
}
