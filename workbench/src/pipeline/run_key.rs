//! What a run's answers depend on, as hashes: the [`RunKey`] that decides whether a
//! stored result may be reused and whether a killed run's journal may be continued, and
//! the check that two runs can be compared question by question ([`check_comparable`]).
//!
//! A [`RunKey`] holds the sha256 of the resolved configuration (its JSON), the sha256 of
//! the program, and one entry per input the configuration reads ([`inputs`]):
//!
//! | input | keyed by |
//! |---|---|
//! | `reader.prompt`, `query_transform.prompt`, `method.prompt`, `evaluation.judge_prompt` | the file's contents (sha256) |
//! | `evaluation.judge_calibration` (a judge without `judge_cut`) | the cut the calibration record ([`calibration::RECORD`](crate::evaluate::calibration::RECORD)) gives this judge and prompt, 0.5 without a row |
//! | `evaluation.judge_model` on a server (`judge_base_url`) | the server's address and the model's name |
//! | `questions`, `corpus` named by `path` | the contents of every file read (a folder: each file's relative path and contents) |
//! | `questions`, `corpus` named by `asset` | the sha256 pins of the asset's files in `data/assets.toml` (a cached asset file is checked against its pin whenever it is read) |
//! | a model given as a path (`reader.model`, `rerank.model`, a dense retriever's `model`, `evaluation.judge_model`) | its path and size in bytes (a folder: each file's relative path and size) |
//! | a model given as an asset name | the sha256 pins of its files |
//! | a model given as `hf:ORG/NAME[@REVISION]/FILE` | that name; at a branch or tag, also the sha256 of the file the hub cache holds for it (downloaded first when absent) |
//! | a `trained:<recipe>` model | the recipe name (the checkpoint is trained by the program from the recipe) |
//!
//! Model files given by path are keyed by size, not contents: GGUF weights run to
//! gigabytes, and hashing them on every run would cost more than the run of a small
//! question set; an edited prompt or question file, which is what changes between runs
//! in practice, is caught by its contents. An `openai` reader's model is known only by
//! its name (in the configuration): the server's weights are not keyed.
//!
//! The judge prompt and model are inputs only when `evaluation.judge_model` is set, the
//! query-transform prompt only with a `[query_transform]` section, and the corpus only
//! when there is a retriever: what a run does not read does not key it.

use super::config::{CorpusKind, QuestionsKind};
use super::PipelineConfig;
use crate::assets::{sha256_bytes, sha256_file, Assets, ModelRef};
use crate::{Error, QaExample, Result};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

/// The identity of a run's results: two runs with equal keys give the same answers
/// (times aside). See the [module docs](self) for what each input is keyed by.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunKey {
    /// sha256 of the resolved configuration's JSON.
    pub config: String,
    /// sha256 of the program that runs it (`results::executable_sha256`).
    pub program: String,
    /// Input name (`reader.prompt`, `questions`, `corpus`, `reader.model`, …) → its key.
    pub inputs: BTreeMap<String, String>,
}

impl RunKey {
    /// The key of `config` run by the program whose sha256 is `program`: hashes the
    /// files the configuration reads ([`inputs`]).
    ///
    /// Errors: an input file or folder that cannot be read ([`Error::Io`] naming it); an
    /// unknown asset name.
    pub fn new(config: &PipelineConfig, program: &str) -> Result<Self> {
        Ok(RunKey {
            config: config_sha256(&serde_json::to_value(config)?),
            program: program.to_string(),
            inputs: inputs(config)?,
        })
    }

    /// One sha256 over the whole key (lowercase hex): the journal's key.
    pub fn digest(&self) -> String {
        // A struct of strings and a string map always serializes.
        sha256_bytes(serde_json::to_string(self).unwrap_or_default().as_bytes())
    }

    /// What differs from `earlier`, in words: `the configuration`, `the program`, and
    /// each input whose key differs, is new or is gone (`` `reader.prompt` ``, …). Empty
    /// when the keys are equal.
    pub fn changes(&self, earlier: &RunKey) -> Vec<String> {
        let mut out = Vec::new();
        if self.config != earlier.config {
            out.push("the configuration".to_string());
        }
        if self.program != earlier.program {
            out.push("the program".to_string());
        }
        let names: std::collections::BTreeSet<&String> =
            self.inputs.keys().chain(earlier.inputs.keys()).collect();
        for name in names {
            if self.inputs.get(name) != earlier.inputs.get(name) {
                out.push(format!("`{name}`"));
            }
        }
        out
    }

    /// What a result folder records as its configuration (`config.json`): the resolved
    /// `config` itself, the program's sha256 and the inputs' keys. A stored result is
    /// reused only when this JSON is equal ([`crate::results::ResultDir::is_fresh`]).
    pub fn resolved(&self, config: &PipelineConfig) -> Result<serde_json::Value> {
        Ok(serde_json::json!({
            "config": config,
            "executable_sha256": self.program,
            "inputs": self.inputs,
        }))
    }

    /// The key recorded in a [`RunKey::resolved`] JSON (`None` when it is not of that
    /// shape, e.g. written before inputs were recorded).
    pub fn of_resolved(v: &serde_json::Value) -> Option<RunKey> {
        Some(RunKey {
            config: config_sha256(v.get("config")?),
            program: v.get("executable_sha256")?.as_str()?.to_string(),
            inputs: serde_json::from_value(v.get("inputs")?.clone()).ok()?,
        })
    }
}

/// sha256 of a configuration's JSON (its compact serialization; object keys sorted).
fn config_sha256(v: &serde_json::Value) -> String {
    sha256_bytes(v.to_string().as_bytes())
}

/// The keys of the files `config` reads that affect its answers, by input name (see the
/// [module docs](self)).
///
/// Errors: a file or folder that cannot be read ([`Error::Io`] naming it); an unknown
/// asset name; no project root when an asset is named.
pub fn inputs(config: &PipelineConfig) -> Result<BTreeMap<String, String>> {
    let mut k = Keys {
        config,
        assets: None,
        out: BTreeMap::new(),
    };
    k.file("reader.prompt", &config.reader.prompt)?;
    if let Some(f) = config.method.as_ref().and_then(|m| m.prompt_file()) {
        k.file("method.prompt", f)?;
    }
    if let Some(t) = &config.query_transform {
        k.file("query_transform.prompt", &t.prompt)?;
    }
    if config.reader.spec.model_is_local() {
        k.model("reader.model", config.reader.spec.model())?;
    }
    if !config.evaluation.judge_model.trim().is_empty() {
        let e = &config.evaluation;
        k.file("evaluation.judge_prompt", &e.judge_prompt)?;
        if e.judge_base_url.trim().is_empty() {
            k.model("evaluation.judge_model", &e.judge_model)?;
        } else {
            // A server's model is known by its name only.
            k.out.insert(
                "evaluation.judge_model".to_string(),
                format!("server {} model {}", e.judge_base_url.trim(), e.judge_model),
            );
        }
        if e.judge_cut.is_none() {
            // The cut the calibration record gives this judge and prompt (0.5 without one):
            // a new calibration of another judge leaves the key as it is.
            let mut resolved = config.clone();
            resolved.resolve_judge_cut()?;
            k.out.insert(
                "evaluation.judge_calibration".to_string(),
                format!(
                    "cut {}",
                    resolved
                        .evaluation
                        .judge_cut
                        .unwrap_or(crate::evaluate::judge::DEFAULT_CUT)
                ),
            );
        }
    }
    if let Some(r) = &config.rerank {
        k.model("rerank.model", r.model())?;
    }
    for (i, r) in config.retrieval.retrievers.iter().enumerate() {
        if let Some(m) = r.model() {
            k.model(&format!("retrieval.retrievers[{i}].model"), m)?;
        }
    }
    k.questions()?;
    if !config.retrieval.retrievers.is_empty() {
        k.corpus()?;
    }
    Ok(k.out)
}

struct Keys<'a> {
    config: &'a PipelineConfig,
    assets: Option<Assets>,
    out: BTreeMap<String, String>,
}

impl Keys<'_> {
    fn assets(&mut self) -> Result<&Assets> {
        if self.assets.is_none() {
            self.assets = Some(Assets::load()?);
        }
        // Set just above.
        self.assets
            .as_ref()
            .ok_or_else(|| Error::param("assets", "not loaded"))
    }

    /// The sha256 pins of asset `name`'s files, as one hash.
    fn asset(&mut self, name: &str) -> Result<String> {
        let pins = self.assets()?.input_checksums([name])?;
        let mut text = String::new();
        for (file, sha) in pins {
            text.push_str(&format!("{file}\t{sha}\n"));
        }
        Ok(format!(
            "asset {name} sha256:{}",
            sha256_bytes(text.as_bytes())
        ))
    }

    /// A file's contents.
    fn file(&mut self, name: &str, path: &str) -> Result<()> {
        let p = self.config.resolve(path);
        self.out
            .insert(name.to_string(), format!("sha256:{}", sha256_file(&p)?));
        Ok(())
    }

    /// A file's contents, or a folder's files (relative paths and contents).
    fn contents(&self, p: &Path) -> Result<String> {
        if p.is_dir() {
            let mut text = String::new();
            for (rel, f) in walk(p)? {
                text.push_str(&format!("{rel}\t{}\n", sha256_file(&f)?));
            }
            Ok(format!("folder sha256:{}", sha256_bytes(text.as_bytes())))
        } else {
            Ok(format!("sha256:{}", sha256_file(p)?))
        }
    }

    /// A model: by path and size, by its asset pins, or by its recipe name.
    fn model(&mut self, name: &str, value: &str) -> Result<()> {
        let key = match ModelRef::parse(value) {
            ModelRef::Trained(r) => format!("trained:{r}"),
            ModelRef::Asset(a) => self.asset(a)?,
            ModelRef::Hub(h) => {
                let hub = crate::assets::HubFile::parse(h, "model")?;
                if is_commit(&hub.revision) {
                    // A commit does not move: its name is the file's identity.
                    hub.to_string()
                } else {
                    // A branch or tag moves: the file the cache holds for it now (downloaded
                    // first when absent), by the LFS sha256 the hub names its blob by
                    // (checked at download), else by hashing it.
                    let path = self.assets()?.resolve_hub(&hub)?;
                    let blob = path.canonicalize().map_err(|e| Error::io(&path, e))?;
                    let name = blob
                        .file_name()
                        .map(|n| n.to_string_lossy().to_ascii_lowercase())
                        .unwrap_or_default();
                    if is_sha256(&name) {
                        format!("{hub} sha256:{name}")
                    } else {
                        format!("{hub} sha256:{}", sha256_file(&blob)?)
                    }
                }
            }
            ModelRef::Path(p) => {
                let full = self.config.resolve(p);
                let size = |f: &Path| -> Result<u64> {
                    Ok(std::fs::metadata(f).map_err(|e| Error::io(f, e))?.len())
                };
                if full.is_dir() {
                    let mut text = String::new();
                    for (rel, f) in walk(&full)? {
                        text.push_str(&format!("{rel}\t{}\n", size(&f)?));
                    }
                    format!(
                        "path {} files:{}",
                        full.display(),
                        sha256_bytes(text.as_bytes())
                    )
                } else {
                    format!("path {} bytes:{}", full.display(), size(&full)?)
                }
            }
        };
        self.out.insert(name.to_string(), key);
        Ok(())
    }

    /// The question set: the files [`super::Pipeline`] reads for it.
    fn questions(&mut self) -> Result<()> {
        let q = &self.config.questions;
        let key = if q.path.is_empty() {
            let asset = match (q.kind, q.asset.as_str()) {
                (QuestionsKind::RagMini, "") => "rag-mini-wikipedia",
                (QuestionsKind::Squad, "") => "squad-v2-dev-half",
                (_, a) => a,
            };
            self.asset(asset)?
        } else {
            let p = self.config.resolve(&q.path);
            match q.kind {
                // The questions' passages come from the `infos.csv` beside them.
                QuestionsKind::RagMini => self.pair(&p, "infos.csv")?,
                QuestionsKind::Jsonl | QuestionsKind::Squad => self.contents(&p)?,
            }
        };
        self.out.insert("questions".into(), key);
        Ok(())
    }

    /// The corpus: the files [`super::Pipeline`] reads for it.
    fn corpus(&mut self) -> Result<()> {
        let c = &self.config.corpus;
        let key = if c.kind == CorpusKind::Wikipedia || c.path.is_empty() {
            let asset = match (c.kind, c.asset.as_str()) {
                (CorpusKind::RagMini, "") => "rag-mini-wikipedia",
                (CorpusKind::Squad, "") => "squad-v2-dev-half",
                (_, a) => a,
            };
            self.asset(asset)?
        } else {
            let p = self.config.resolve(&c.path);
            match c.kind {
                CorpusKind::RagMini => self.pair(&p, "questions.csv")?,
                _ => self.contents(&p)?,
            }
        };
        self.out.insert("corpus".into(), key);
        Ok(())
    }

    /// `p` and the file `sibling` beside it.
    fn pair(&self, p: &Path, sibling: &str) -> Result<String> {
        let s = p.with_file_name(sibling);
        let text = format!("{}\n{}\n", self.contents(p)?, self.contents(&s)?);
        Ok(format!("files sha256:{}", sha256_bytes(text.as_bytes())))
    }
}

/// Every file under `dir` as (path relative to `dir` with `/` separators, full path),
/// sorted by relative path.
fn walk(dir: &Path) -> Result<Vec<(String, PathBuf)>> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).map_err(|e| Error::io(&d, e))? {
            let p = e.map_err(|e| Error::io(&d, e))?.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p
                    .strip_prefix(dir)
                    .unwrap_or(&p)
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy())
                    .collect::<Vec<_>>()
                    .join("/");
                out.push((rel, p));
            }
        }
    }
    out.sort();
    Ok(out)
}

/// One side of a comparison: what [`check_comparable`] looks at.
#[derive(Debug, Clone, Copy)]
pub struct Comparand<'a> {
    /// How the run is named in the error (its config file, or its name).
    pub name: &'a str,
    /// Its configuration.
    pub config: &'a PipelineConfig,
    /// The questions it runs, after sampling.
    pub questions: &'a [QaExample],
    /// Its key (for the judge's prompt and model).
    pub key: &'a RunKey,
}

/// Check that `other` can be compared with `base` question by question: the same
/// question ids, each with the same question text and the same gold answers (in any
/// order), the same answer-match rule, and the same LLM judge (none, or the same model
/// and prompt).
///
/// Errors: [`Error::Incomparable`] naming both runs and the first difference found (the
/// first question id one has and the other lacks, the first id whose text or answers
/// differ, the two rules, the two judges).
pub fn check_comparable(base: Comparand<'_>, other: Comparand<'_>) -> Result<()> {
    let fail = |what: String| Error::Incomparable {
        base: base.name.to_string(),
        other: other.name.to_string(),
        what,
    };
    let index: HashMap<&str, &QaExample> =
        other.questions.iter().map(|q| (q.id.as_str(), q)).collect();
    let base_ids: std::collections::HashSet<&str> =
        base.questions.iter().map(|q| q.id.as_str()).collect();
    if let Some(q) = base
        .questions
        .iter()
        .find(|q| !index.contains_key(q.id.as_str()))
    {
        return Err(fail(format!(
            "question `{}` is in {} but not in {} ({} vs {} questions)",
            q.id,
            base.name,
            other.name,
            base.questions.len(),
            other.questions.len()
        )));
    }
    if let Some(q) = other
        .questions
        .iter()
        .find(|q| !base_ids.contains(q.id.as_str()))
    {
        return Err(fail(format!(
            "question `{}` is in {} but not in {} ({} vs {} questions)",
            q.id,
            other.name,
            base.name,
            other.questions.len(),
            base.questions.len()
        )));
    }
    for q in base.questions {
        let o = index[q.id.as_str()];
        if o.question != q.question {
            return Err(fail(format!(
                "question `{}` reads {:?} in {} but {:?} in {}",
                q.id, q.question, base.name, o.question, other.name
            )));
        }
        let sorted = |a: &[String]| {
            let mut v = a.to_vec();
            v.sort();
            v
        };
        if sorted(&o.answers) != sorted(&q.answers) {
            return Err(fail(format!(
                "question `{}` has the gold answers {:?} in {} but {:?} in {}",
                q.id, q.answers, base.name, o.answers, other.name
            )));
        }
    }
    let (a, b) = (&base.config.evaluation, &other.config.evaluation);
    if a.answer_match != b.answer_match {
        return Err(fail(format!(
            "`evaluation.answer_match` is {} in {} but {} in {}",
            a.answer_match.map_or("unset", |r| r.name()),
            base.name,
            b.answer_match.map_or("unset", |r| r.name()),
            other.name
        )));
    }
    let judge = |c: &Comparand| {
        let e = &c.config.evaluation;
        (!e.judge_model.trim().is_empty()).then(|| {
            (
                e.judge_model.clone(),
                c.key.inputs.get("evaluation.judge_model").cloned(),
                c.key.inputs.get("evaluation.judge_prompt").cloned(),
            )
        })
    };
    let (ja, jb) = (judge(&base), judge(&other));
    if ja != jb {
        let say = |j: &Option<(String, Option<String>, Option<String>)>| match j {
            None => "no judge".to_string(),
            Some((m, mk, p)) => format!(
                "judge `{m}` ({}; prompt {})",
                mk.as_deref().unwrap_or("unkeyed"),
                p.as_deref().unwrap_or("unkeyed")
            ),
        };
        let what = match (&ja, &jb) {
            (Some((ma, mka, _)), Some((mb, mkb, _))) if ma == mb && mka == mkb => {
                "the judge prompt (`evaluation.judge_prompt`) differs"
            }
            _ => "the LLM judge (`evaluation.judge_model`) differs",
        };
        return Err(fail(format!(
            "{what}: {} in {}, {} in {}",
            say(&ja),
            base.name,
            say(&jb),
            other.name
        )));
    }
    let cut = |e: &super::config::EvaluationConfig| {
        e.judge_cut.unwrap_or(crate::evaluate::judge::DEFAULT_CUT)
    };
    if ja.is_some() && cut(a) != cut(b) {
        return Err(fail(format!(
            "the judge's P(Yes) cut (`evaluation.judge_cut`) is {} in {} but {} in {}",
            cut(a),
            base.name,
            cut(b),
            other.name
        )));
    }
    Ok(())
}

/// Whether `r` is a full commit id (40 hex digits).
fn is_commit(r: &str) -> bool {
    r.len() == 40 && r.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Whether `s` is a sha256 in hex.
fn is_sha256(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evaluate::answer_match::AnswerMatch;
    use crate::pipeline::trace::Journal;

    /// A config in a temp folder reading a prompt, questions, a corpus and a `.gguf`
    /// path (a stand-in file: nothing is loaded).
    fn project() -> (tempfile::TempDir, PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        std::fs::write(d.join("prompt.txt"), "{passages}\nQ: {question}\n").unwrap();
        std::fs::write(
            d.join("questions.jsonl"),
            "{\"id\": \"q1\", \"question\": \"Who?\", \"answer\": [\"Ann\"]}\n",
        )
        .unwrap();
        std::fs::write(
            d.join("corpus.jsonl"),
            "{\"id\": \"a\", \"text\": \"Ann wrote it.\"}\n",
        )
        .unwrap();
        std::fs::write(d.join("m.gguf"), b"0123456789").unwrap();
        let config = d.join("config.toml");
        std::fs::write(
            &config,
            "name = \"k\"\n[corpus]\npath = \"corpus.jsonl\"\n\
             [[retrieval.retrievers]]\nkind = \"bm25\"\n\
             [reader]\nmodel = \"./m.gguf\"\nprompt = \"prompt.txt\"\npassages = 1\n\
             [questions]\npath = \"questions.jsonl\"\n",
        )
        .unwrap();
        (tmp, config)
    }

    fn key(config: &Path) -> RunKey {
        RunKey::new(&PipelineConfig::from_file(config).unwrap(), "program-1").unwrap()
    }

    #[test]
    fn editing_an_input_file_changes_its_key_and_nothing_else() {
        let (tmp, config) = project();
        let d = tmp.path();
        let k0 = key(&config);
        let names: Vec<&str> = k0.inputs.keys().map(String::as_str).collect();
        assert_eq!(
            names,
            ["corpus", "questions", "reader.model", "reader.prompt"]
        );
        assert_eq!(key(&config), k0, "hashing is deterministic");
        let edit = |file: &str, text: &str| std::fs::write(d.join(file), text).unwrap();

        edit("prompt.txt", "{passages}\nQuestion: {question}\n");
        let k1 = key(&config);
        assert_eq!(k1.changes(&k0), ["`reader.prompt`"]);
        assert_ne!(k1.digest(), k0.digest());
        assert_eq!(k1.config, k0.config, "the config file itself is unchanged");

        edit(
            "questions.jsonl",
            "{\"id\": \"q1\", \"question\": \"Who?\", \"answer\": [\"Bob\"]}\n",
        );
        assert_eq!(key(&config).changes(&k1), ["`questions`"]);
        let k2 = key(&config);
        edit(
            "corpus.jsonl",
            "{\"id\": \"a\", \"text\": \"Bob wrote it.\"}\n",
        );
        assert_eq!(key(&config).changes(&k2), ["`corpus`"]);
        let k3 = key(&config);

        // Weights by path are keyed by size: same size, same key; another size, another.
        edit("m.gguf", "9876543210");
        assert_eq!(key(&config), k3);
        edit("m.gguf", "01234567890");
        assert_eq!(key(&config).changes(&k3), ["`reader.model`"]);
        let k4 = key(&config);

        // The program and the configuration are part of the key.
        let other = RunKey::new(&PipelineConfig::from_file(&config).unwrap(), "program-2");
        assert_eq!(other.unwrap().changes(&k4), ["the program"]);
        let text = std::fs::read_to_string(&config).unwrap();
        std::fs::write(&config, text.replace("passages = 1", "passages = 2")).unwrap();
        assert_eq!(key(&config).changes(&k4), ["the configuration"]);
    }

    #[test]
    fn the_judge_calibration_record_keys_a_run_without_its_own_cut() {
        use crate::evaluate::calibration::{self, Calibrated, CalibrationOptions};
        let (tmp, config) = project();
        let d = tmp.path();
        let mut c = PipelineConfig::from_file(&config).unwrap();
        c.base_dir = d.to_path_buf();
        std::fs::create_dir_all(d.join("data/prompts")).unwrap();
        let template = "{question} {gold} {answer}";
        std::fs::write(d.join("data/prompts/judge.txt"), template).unwrap();
        c.evaluation.judge_model = d.join("m.gguf").display().to_string();
        let k0 = RunKey::new(&c, "p").unwrap();
        assert_eq!(k0.inputs["evaluation.judge_calibration"], "cut 0.5");
        // A record with a row for another judge: the key stays.
        let record = d.join(calibration::RECORD);
        std::fs::create_dir_all(record.parent().unwrap()).unwrap();
        let p = [0.6, 0.7, 0.8, 0.9, 0.65, 0.85];
        let l = [false, false, true, true, false, true];
        let sha = crate::assets::sha256_bytes(template.as_bytes());
        let row = |judge: &str| {
            let of = Calibrated {
                judge,
                backend: "gguf",
                prompt_sha256: &sha,
                labels_sha256: "x",
            };
            // Any 4 of the 6 items hold both labels: every fold's complement has a cut.
            let opts = CalibrationOptions {
                folds: 3,
                ..Default::default()
            };
            calibration::calibrate(of, &p, &l, &[0, 1, 2, 3, 4, 5], opts).unwrap()
        };
        calibration::write_record(&record, &[row("other")]).unwrap();
        assert_eq!(RunKey::new(&c, "p").unwrap(), k0);
        // A row for this judge and prompt: its cut keys the run.
        let judge = c.evaluation.judge_model.clone();
        calibration::write_record(&record, &[row("other"), row(&judge)]).unwrap();
        let k1 = RunKey::new(&c, "p").unwrap();
        assert_eq!(k1.changes(&k0), ["`evaluation.judge_calibration`"]);
        assert_eq!(k1.inputs["evaluation.judge_calibration"], "cut 0.75");
        // A config with its own cut does not read the record.
        c.evaluation.judge_cut = Some(0.6);
        let k2 = RunKey::new(&c, "p").unwrap();
        assert!(!k2.inputs.contains_key("evaluation.judge_calibration"));
        // A judge on a server is keyed by its address and name, not looked up as an asset.
        c.evaluation.judge_base_url = "http://127.0.0.1:9/v1".into();
        c.evaluation.judge_model = "big-judge".into();
        let k3 = RunKey::new(&c, "p").unwrap();
        assert_eq!(
            k3.inputs["evaluation.judge_model"],
            "server http://127.0.0.1:9/v1 model big-judge"
        );
    }

    #[test]
    fn a_result_folder_records_the_key_it_was_written_with() {
        let (_tmp, config) = project();
        let c = PipelineConfig::from_file(&config).unwrap();
        let k = RunKey::new(&c, "program-1").unwrap();
        let resolved = k.resolved(&c).unwrap();
        // As written to and read back from `config.json`.
        let back: serde_json::Value =
            serde_json::from_str(&serde_json::to_string_pretty(&resolved).unwrap()).unwrap();
        assert_eq!(RunKey::of_resolved(&back), Some(k));
        assert_eq!(
            RunKey::of_resolved(&serde_json::json!({"config": {}})),
            None
        );
    }

    #[test]
    fn a_missing_input_file_is_an_error_naming_it() {
        let (tmp, config) = project();
        let c = PipelineConfig::from_file(&config).unwrap();
        std::fs::remove_file(tmp.path().join("prompt.txt")).unwrap();
        let e = RunKey::new(&c, "p").unwrap_err().to_string();
        assert!(e.contains("prompt.txt"), "{e}");
    }

    #[test]
    fn a_journal_of_another_prompt_is_started_over_naming_the_prompt() {
        let (tmp, config) = project();
        let jp = tmp.path().join("k.journal.jsonl");
        let k0 = key(&config);
        Journal::open_for(&jp, &k0).unwrap().begin().unwrap();
        assert!(Journal::open_for(&jp, &k0).unwrap().discarded().is_none());
        std::fs::write(tmp.path().join("prompt.txt"), "{passages}\n{question}?\n").unwrap();
        let j = Journal::open_for(&jp, &key(&config)).unwrap();
        let why = j.discarded().unwrap();
        assert_eq!(why, "`reader.prompt` changed since it was written");
        assert!(j.done().is_empty());
    }

    fn q(id: &str, question: &str, answers: &[&str]) -> QaExample {
        QaExample {
            id: id.into(),
            question: question.into(),
            answers: answers.iter().map(|a| a.to_string()).collect(),
            context_id: None,
            title: None,
        }
    }

    #[test]
    fn runs_are_compared_only_on_the_same_questions_answers_rule_and_judge() {
        let config = PipelineConfig::default();
        let k = RunKey {
            config: "c".into(),
            program: "p".into(),
            inputs: BTreeMap::new(),
        };
        let base_q = [q("q1", "Who?", &["Ann", "A."]), q("q2", "When?", &["1969"])];
        let side = |name: &'static str, qs: &'static [QaExample]| Comparand {
            name,
            config: &config,
            questions: qs,
            key: &k,
        };
        let leak = |v: Vec<QaExample>| -> &'static [QaExample] { Vec::leak(v) };
        let base = side("a.toml", leak(base_q.to_vec()));
        let err = |other: Comparand| check_comparable(base, other).unwrap_err().to_string();

        // Same questions in another order, answers in another order: comparable.
        let same = leak(vec![
            q("q2", "When?", &["1969"]),
            q("q1", "Who?", &["A.", "Ann"]),
        ]);
        check_comparable(base, side("b.toml", same)).unwrap();

        let fewer = leak(vec![q("q1", "Who?", &["Ann", "A."])]);
        let e = err(side("b.toml", fewer));
        assert_eq!(
            e,
            "cannot compare b.toml with a.toml: question `q2` is in a.toml but not in b.toml \
             (2 vs 1 questions)"
        );
        let more = leak(vec![
            q("q1", "Who?", &["Ann", "A."]),
            q("q2", "When?", &["1969"]),
            q("q9", "Why?", &["So"]),
        ]);
        assert!(err(side("b.toml", more)).contains("question `q9` is in b.toml but not in a.toml"));
        let text = leak(vec![
            q("q1", "Who?", &["Ann", "A."]),
            q("q2", "When??", &["1969"]),
        ]);
        let e = err(side("b.toml", text));
        assert!(
            e.contains("question `q2` reads \"When?\" in a.toml but \"When??\""),
            "{e}"
        );
        let gold = leak(vec![q("q1", "Who?", &["Ann"]), q("q2", "When?", &["1969"])]);
        let e = err(side("b.toml", gold));
        assert!(e.contains("question `q1` has the gold answers"), "{e}");

        let mut squad = PipelineConfig::default();
        squad.evaluation.answer_match = Some(AnswerMatch::Squad);
        let e = check_comparable(
            base,
            Comparand {
                config: &squad,
                ..side("b.toml", leak(base_q.to_vec()))
            },
        )
        .unwrap_err();
        assert!(matches!(e, Error::Incomparable { .. }));
        assert!(e.to_string().contains("`evaluation.answer_match`"), "{e}");

        let mut judged = PipelineConfig::default();
        judged.evaluation.judge_model = "judge.gguf".into();
        let keyed = |prompt: &str| RunKey {
            inputs: [
                (
                    "evaluation.judge_model".to_string(),
                    "path judge.gguf bytes:9".to_string(),
                ),
                ("evaluation.judge_prompt".to_string(), prompt.to_string()),
            ]
            .into(),
            ..k.clone()
        };
        let (k1, k2) = (keyed("sha256:1"), keyed("sha256:2"));
        let judged_b = Comparand {
            config: &judged,
            key: &k1,
            ..side("b.toml", leak(base_q.to_vec()))
        };
        let e = err(judged_b);
        assert!(
            e.contains("the LLM judge (`evaluation.judge_model`) differs"),
            "{e}"
        );
        let judged_a = Comparand {
            name: "a.toml",
            ..judged_b
        };
        check_comparable(judged_a, judged_b).unwrap();
        let e = check_comparable(
            judged_a,
            Comparand {
                key: &k2,
                ..judged_b
            },
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("the judge prompt (`evaluation.judge_prompt`) differs"),
            "{e}"
        );
        // The same judge at another cut: its verdicts differ.
        let mut cut = judged.clone();
        cut.evaluation.judge_cut = Some(0.7);
        let e = check_comparable(
            judged_a,
            Comparand {
                config: &cut,
                ..judged_b
            },
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("the judge's P(Yes) cut (`evaluation.judge_cut`) is 0.5 in a.toml but 0.7 in b.toml"),
            "{e}"
        );
        // Unset is 0.5 (what runs before the cut was recorded used).
        let mut half = judged.clone();
        half.evaluation.judge_cut = Some(0.5);
        check_comparable(
            judged_a,
            Comparand {
                config: &half,
                ..judged_b
            },
        )
        .unwrap();
    }
}
