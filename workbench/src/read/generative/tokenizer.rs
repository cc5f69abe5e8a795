//! The tokenizer stored in a GGUF's metadata, rebuilt as a Hugging Face `tokenizers` BPE.
//!
//! Only `tokenizer.ggml.model = "gpt2"` (byte-level BPE) is supported. The pre-tokenizer is
//! chosen from `tokenizer.ggml.pre` the way llama.cpp chooses it, and never adds a prefix
//! space (llama.cpp does not for BPE vocabularies):
//!
//! | `tokenizer.ggml.pre` | split before byte-level BPE |
//! |---|---|
//! | `qwen2` | Qwen2's regex (single digits) |
//! | `llama3`, `llama-bpe`, `smaug-bpe` | Llama 3's regex (digits in groups of up to 3) |
//! | `smollm`, `starcoder`, `refact`, `codeshell`, `exaone`, `minerva-7b` | single digits, then GPT-2's regex |
//! | `gpt2`, `default` | GPT-2's regex |
//!
//! Control (type 3) and user-defined (type 4) tokens are matched as whole tokens in the
//! input text (llama.cpp's `parse_special = true`); control tokens are left out of
//! detokenized text.
//!
//! The regexes run on `tokenizers`' pure-Rust backend (fancy-regex), so a tokenizer built in
//! one evcxr notebook cell encodes in later cells (Oniguruma, the other backend, keeps static
//! tables that evcxr duplicates per cell). On 200,000 random texts (letters, digits, Unicode
//! whitespace, punctuation, apostrophes, marks, emoji) and long runs of each, both backends
//! split Qwen2's, Llama 3's and GPT-2's regexes identically; fancy-regex's only failure is a
//! whitespace run of about a million characters (see [`MAX_WHITESPACE_RUN`]).

use super::gguf::GgufFile;
use crate::{Error, Result};
use tokenizers::decoders::DecoderWrapper;
use tokenizers::models::bpe::{Vocab, BPE};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::{AddedToken, SplitDelimiterBehavior, Tokenizer};

const REGEX_QWEN2: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const REGEX_LLAMA3: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// The longest run of whitespace characters `encode` accepts. fancy-regex backtracks over
/// `\s+(?!\S)` with one stack entry per character; past its stack of 1,000,000 entries the
/// match fails and `tokenizers` ends the split there without an error, so the rest of the
/// text would be encoded as one piece (measured: runs of 999,998 whitespace characters and
/// more, for all three regexes). Longer runs are refused with an error instead.
pub(crate) const MAX_WHITESPACE_RUN: usize = 500_000;

/// The longest run of whitespace characters (Unicode `White_Space`, the regexes' `\s`) in
/// `text`: its byte offset and length in characters. `None` for a text without whitespace.
fn longest_whitespace_run(text: &str) -> Option<(usize, usize)> {
    let mut best: Option<(usize, usize)> = None;
    let mut run: Option<(usize, usize)> = None;
    for (i, c) in text.char_indices() {
        if c.is_whitespace() {
            let r = run.get_or_insert((i, 0));
            r.1 += 1;
            if best.is_none_or(|b| r.1 > b.1) {
                best = Some(*r);
            }
        } else {
            run = None;
        }
    }
    best
}

/// Token texts llama.cpp (llama-vocab.cpp) treats as end-of-generation, whatever their
/// GGUF token type: a token with one of these texts is made a control token (so the text
/// is parsed as that token) and ends generation. The last group is the fill-in-the-middle
/// pad / repository / file-separator tokens, which llama.cpp also adds to the EOG set.
const EOG_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "</s>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|eom_id|>",
    "<|end_of_text|>",
    "<EOT>",
    "_<EOT>",
    "<｜end▁of▁sentence｜>",
    "<end_of_utterance>",
    "<|fim_pad|>",
    "<fim-pad>",
    "<|fim_repo|>",
    "<|repo_name|>",
    "<fim-repo>",
    "<|file_sep|>",
];

/// A GGUF tokenizer.
pub(crate) struct GgufTokenizer {
    pub tok: Tokenizer,
    pub tokens: Vec<String>,
    pub bos: Option<u32>,
    pub add_bos: bool,
    pub eos: Option<u32>,
    pub add_eos: bool,
    /// Every end-of-generation id (EOS, EOT, EOM and the control tokens llama.cpp treats as
    /// such), sorted.
    pub eog: Vec<u32>,
}

fn tok_err(g: &GgufFile, e: impl std::fmt::Display) -> Error {
    Error::bad_input(&g.path, format!("tokenizer: {e}"))
}

fn split(regex: &str) -> std::result::Result<PreTokenizerWrapper, tokenizers::Error> {
    Ok(Split::new(
        SplitPattern::Regex(regex.to_string()),
        SplitDelimiterBehavior::Isolated,
        false,
    )?
    .into())
}

impl GgufTokenizer {
    /// Build the tokenizer from `g`'s metadata.
    pub fn from_gguf(g: &GgufFile) -> Result<Self> {
        let model = g.str("tokenizer.ggml.model")?;
        if model != "gpt2" {
            return Err(tok_err(
                g,
                format!(
                    "tokenizer.ggml.model `{model}` is not supported (only `gpt2` byte-level BPE)"
                ),
            ));
        }
        let tokens = g.strings("tokenizer.ggml.tokens")?;
        let merges: Vec<(String, String)> = g
            .strings("tokenizer.ggml.merges")?
            .into_iter()
            .enumerate()
            .map(|(i, m)| {
                m.split_once(' ')
                    .map(|(a, b)| (a.to_string(), b.to_string()))
                    .ok_or_else(|| tok_err(g, format!("merge {i} `{m}` has no space")))
            })
            .collect::<Result<_>>()?;
        let vocab: Vocab = tokens
            .iter()
            .enumerate()
            .map(|(i, t)| (t.clone(), i as u32))
            .collect();
        let mut builder = BPE::builder().vocab_and_merges(vocab, merges);
        if let Some(ig) = g.opt_bool("tokenizer.ggml.ignore_merges")? {
            builder = builder.ignore_merges(ig);
        }
        let bpe = builder.build().map_err(|e| tok_err(g, e))?;
        let mut tok = Tokenizer::new(bpe);

        let pre = match g.get("tokenizer.ggml.pre") {
            Some(_) => g.str("tokenizer.ggml.pre")?.to_string(),
            None => "default".to_string(),
        };
        let bl = ByteLevel::new(false, false, false);
        let pt: PreTokenizerWrapper = match pre.as_str() {
            "qwen2" => Sequence::new(vec![split(REGEX_QWEN2).map_err(|e| tok_err(g, e))?, bl.into()]).into(),
            "llama3" | "llama-bpe" | "smaug-bpe" => {
                Sequence::new(vec![split(REGEX_LLAMA3).map_err(|e| tok_err(g, e))?, bl.into()]).into()
            }
            "smollm" | "starcoder" | "refact" | "codeshell" | "exaone" | "minerva-7b" => {
                Sequence::new(vec![Digits::new(true).into(), ByteLevel::new(false, false, true).into()]).into()
            }
            "gpt2" | "default" => ByteLevel::new(false, false, true).into(),
            other => {
                return Err(tok_err(
                    g,
                    format!(
                        "pre-tokenizer tokenizer.ggml.pre = `{other}` is not supported \
                         (supported: qwen2, llama3, llama-bpe, smaug-bpe, smollm, starcoder, refact, \
                         codeshell, exaone, minerva-7b, gpt2, default)"
                    ),
                ))
            }
        };
        tok.with_pre_tokenizer(Some(pt));
        tok.with_decoder(Some(DecoderWrapper::ByteLevel(ByteLevel::default())));

        let types = g.opt_ints("tokenizer.ggml.token_type")?;
        let mut control = Vec::new();
        let mut user = Vec::new();
        if let Some(types) = &types {
            if types.len() != tokens.len() {
                return Err(tok_err(
                    g,
                    format!(
                        "tokenizer.ggml.token_type has {} entries for {} tokens",
                        types.len(),
                        tokens.len()
                    ),
                ));
            }
            for (i, ty) in types.iter().enumerate() {
                match ty {
                    3 => control.push(i as u32),
                    4 => user.push(i as u32),
                    _ => {}
                }
            }
        }
        let id = |key: &str| -> Result<Option<u32>> {
            match g.opt_usize(key)? {
                Some(i) if i < tokens.len() => Ok(Some(i as u32)),
                Some(i) => Err(tok_err(
                    g,
                    format!("{key} = {i} is outside the vocabulary of {}", tokens.len()),
                )),
                None => Ok(None),
            }
        };
        let bos = id("tokenizer.ggml.bos_token_id")?;
        let eos = id("tokenizer.ggml.eos_token_id")?;
        let eot = id("tokenizer.ggml.eot_token_id")?;
        let eom = id("tokenizer.ggml.eom_token_id")?;
        // End-of-generation texts are control tokens whatever the type array says, as in
        // llama.cpp (Qwen's `</s>` is a normal token in the GGUF and control in llama.cpp).
        let eog_by_text: Vec<u32> = tokens
            .iter()
            .enumerate()
            .filter(|(_, t)| EOG_TEXTS.contains(&t.as_str()))
            .map(|(i, _)| i as u32)
            .collect();
        user.retain(|u| !eog_by_text.contains(u));
        // BOS/EOS are control tokens even when the type array does not say so.
        for t in [bos, eos, eot, eom]
            .into_iter()
            .flatten()
            .chain(eog_by_text.iter().copied())
        {
            if !control.contains(&t) && !user.contains(&t) {
                control.push(t);
            }
        }
        let specials: Vec<AddedToken> = control
            .iter()
            .map(|&i| AddedToken::from(tokens[i as usize].clone(), true))
            .collect();
        tok.add_special_tokens(specials)
            .map_err(|e| tok_err(g, format!("adding control tokens: {e}")))?;
        let users: Vec<AddedToken> = user
            .iter()
            .map(|&i| AddedToken::from(tokens[i as usize].clone(), false).normalized(false))
            .collect();
        tok.add_tokens(users)
            .map_err(|e| tok_err(g, format!("adding user-defined tokens: {e}")))?;

        let mut eog: Vec<u32> = [eos, eot, eom].into_iter().flatten().collect();
        eog.extend(&eog_by_text);
        eog.sort_unstable();
        eog.dedup();
        Ok(GgufTokenizer {
            tok,
            bos,
            add_bos: g.opt_bool("tokenizer.ggml.add_bos_token")?.unwrap_or(false),
            eos,
            add_eos: g.opt_bool("tokenizer.ggml.add_eos_token")?.unwrap_or(false),
            tokens,
            eog,
        })
    }

    /// Token ids of `text`, special tokens in the text matched as tokens; BOS/EOS added when
    /// `add_special` and the GGUF asks for them. BOS is not added when `text` already
    /// starts with it (a chat template that writes BOS itself): one BOS, never two, as
    /// llama.cpp's server checks.
    pub fn encode(&self, text: &str, add_special: bool) -> Result<Vec<u32>> {
        if let Some((at, n)) = longest_whitespace_run(text) {
            if n > MAX_WHITESPACE_RUN {
                return Err(Error::Tokenizer(format!(
                    "the text has a run of {n} whitespace characters at byte {at}; the \
                     pre-tokenizer splits runs of up to {MAX_WHITESPACE_RUN}"
                )));
            }
        }
        let enc = self
            .tok
            .encode_fast(text, false)
            .map_err(|e| Error::Tokenizer(format!("encoding {} bytes: {e}", text.len())))?;
        let mut ids = Vec::with_capacity(enc.len() + 2);
        if add_special && self.add_bos {
            if let Some(b) = self.bos {
                if enc.get_ids().first() != Some(&b) {
                    ids.push(b);
                }
            }
        }
        ids.extend_from_slice(enc.get_ids());
        if add_special && self.add_eos {
            if let Some(e) = self.eos {
                ids.push(e);
            }
        }
        Ok(ids)
    }

    /// Text of `ids`, control tokens left out.
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        if let Some(bad) = ids.iter().find(|&&i| i as usize >= self.tokens.len()) {
            return Err(Error::Tokenizer(format!(
                "token id {bad} is outside the vocabulary of {}",
                self.tokens.len()
            )));
        }
        self.tok
            .decode(ids, true)
            .map_err(|e| Error::Tokenizer(format!("decoding {} ids: {e}", ids.len())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A four-token vocabulary (`<s>`, `</s>`, `a`, `b`) with BOS `<s>`.
    fn tiny(add_bos: bool) -> GgufTokenizer {
        let tokens: Vec<String> = ["<s>", "</s>", "a", "b"].map(String::from).to_vec();
        let vocab: Vocab = tokens
            .iter()
            .enumerate()
            .map(|(i, t)| (t.clone(), i as u32))
            .collect();
        let bpe = BPE::builder()
            .vocab_and_merges(vocab, Vec::new())
            .build()
            .unwrap();
        let mut tok = Tokenizer::new(bpe);
        tok.add_special_tokens(vec![
            AddedToken::from("<s>", true),
            AddedToken::from("</s>", true),
        ])
        .unwrap();
        GgufTokenizer {
            tok,
            tokens,
            bos: Some(0),
            add_bos,
            eos: Some(1),
            add_eos: false,
            eog: vec![1],
        }
    }

    #[test]
    fn bos_is_not_added_twice() {
        let t = tiny(true);
        assert_eq!(t.encode("ab", true).unwrap(), [0, 2, 3]);
        // A chat template that writes BOS itself: still one BOS.
        assert_eq!(t.encode("<s>ab", true).unwrap(), [0, 2, 3]);
        assert_eq!(t.encode("<s>ab", false).unwrap(), [0, 2, 3]);
        // BOS later in the text is not at the start: BOS is added.
        assert_eq!(t.encode("a<s>b", true).unwrap(), [0, 2, 0, 3]);
        assert_eq!(t.encode("ab", false).unwrap(), [2, 3]);
        assert_eq!(tiny(false).encode("ab", true).unwrap(), [2, 3]);
    }

    #[test]
    fn longest_whitespace_run_finds_offset_and_length() {
        assert_eq!(longest_whitespace_run(""), None);
        assert_eq!(longest_whitespace_run("abc"), None);
        assert_eq!(longest_whitespace_run(" a"), Some((0, 1)));
        // Characters, not bytes: U+3000 is 3 bytes; \t\n\r and U+00A0 are whitespace too.
        assert_eq!(
            longest_whitespace_run("ab  c\u{3000}\u{3000}\t\n\r\u{a0}d  "),
            Some((5, 6))
        );
        assert_eq!(longest_whitespace_run("é   x    "), Some((6, 4)));
    }
}
