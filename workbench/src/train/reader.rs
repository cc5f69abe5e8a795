//! Training recipes of the extractive reader: which supervision, which base model,
//! which hyper-parameters; training once and reusing the checkpoint while the recipe
//! and its inputs are unchanged (`data/cache/readers/<key>/`, the key a sha256 of the
//! recipe and of every input file's sha256, as the embedding cache does).

use super::qa::{self, Feature, QaFeatures, QaTrainModel, SpanExample};
use super::qa_data::{self, SourceCounts, HELD_OUT_ARTICLES};
use super::{Stop, TrainConfig, TrainLog};
use crate::assets::Assets;
use crate::chunk::{Chunker, SlidingWindowParams};
use crate::load::{nq_open, rag_mini, wikipedia_corpus, WIKIPEDIA_CORPORA};
use crate::read::extractive::{char_slice, Decoded, ExtractiveReader, WindowParams};
use crate::read::Context;
use crate::{Error, Passage, QaExample, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use tokenizers::Tokenizer;

/// Bump when the code that turns a recipe into a checkpoint changes meaning.
pub const READER_CACHE_VERSION: &str = "workbench-reader-v2";

/// Which supervision goes into a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Supervision {
    /// Answerable questions of the SQuAD training articles.
    pub squad_answerable: bool,
    /// Unanswerable questions of the SQuAD training articles (target `[CLS]`).
    pub squad_unanswerable: bool,
    /// RAG Mini Wikipedia training questions located in passages.
    pub rag_mini: bool,
    /// NQ-open dev distant supervision over the Wikipedia corpora.
    pub nq: bool,
    /// BM25 depth searched for a passage holding the answer (RAG Mini and NQ).
    pub bm25_k: usize,
    /// Percent of RAG Mini questions held out as test questions (seeded hash of the id).
    pub rag_test_percent: u8,
    /// Seed of the RAG Mini split.
    pub split_seed: u64,
    /// At most this many NQ examples (`None`: all located).
    pub nq_max: Option<usize>,
}

/// Training windows of the default `minilm-squad2` run: 416 updates of 16 over two epochs,
/// the budget of `minilm-all` (the `-full` run trains on every window).
pub const SQUAD2_DEFAULT_FEATURES: usize = 416 * 16 / 2;

/// Training windows of a quick recipe ([`ReaderRecipe::at_scale`]): 200 updates of 16 in
/// one epoch, the fewest of the sizes tried after which `minilm-all-quick` read "Paris" in
/// the reader probes ([`crate::study::reader::PROBES`]); CHANGELOG.md has the measurements.
pub const QUICK_READER_FEATURES: usize = 200 * 16;

/// Epochs of the quick `minilm-squad2` recipe over its [`QUICK_READER_FEATURES`] windows
/// (400 updates). Its windows include unanswerable ones, and after one epoch the null score
/// won on most answerable held-out questions (CHANGELOG.md has the measurements).
pub const QUICK_SQUAD2_EPOCHS: usize = 2;

/// Peak learning rate of a quick recipe (the default's 1e-4 barely moved the head in a
/// short run).
pub const QUICK_READER_LR: f64 = 3e-4;

/// A complete training recipe.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReaderRecipe {
    /// Short name (`minilm-all`, `minilm-squad2`, …).
    pub name: String,
    /// Base model asset.
    pub base: String,
    /// Supervision.
    pub supervision: Supervision,
    /// Training windows (the reader's [`WindowParams`]).
    pub windows: WindowParams,
    /// Seed of the head's initialisation.
    pub init_seed: u64,
    /// Train on at most this many features (a seeded sample; `None`: all).
    pub max_features: Option<usize>,
    /// The training loop's config.
    pub train: TrainConfig,
}

impl ReaderRecipe {
    /// The default recipe (sized for under 20 minutes on 2 quiet cores): MiniLM, SQuAD
    /// training articles' answerable questions + RAG Mini + NQ distant supervision, two
    /// epochs over all their windows (3,314 at 256 tokens: 416 updates of 16).
    pub fn default_minilm() -> Self {
        ReaderRecipe {
            name: "minilm-all".into(),
            base: "all-minilm-l6-v2".into(),
            supervision: Supervision {
                squad_answerable: true,
                squad_unanswerable: false,
                rag_mini: true,
                nq: true,
                bm25_k: 20,
                rag_test_percent: 30,
                split_seed: 13,
                nq_max: None,
            },
            windows: WindowParams {
                max_seq_len: 256,
                doc_stride: 96,
            },
            init_seed: 42,
            max_features: None,
            train: TrainConfig {
                epochs: 2,
                batch_size: 16,
                lr: 1e-4,
                warmup_ratio: 0.1,
                max_grad_norm: Some(1.0),
                seed: 42,
                bucket_batches: 8,
                threads: 2,
                checkpoint_every: Some(50),
                ..TrainConfig::default()
            },
        }
    }

    /// The recipe names [`ReaderRecipe::named`] knows.
    pub const NAMES: [&'static str; 3] = ["minilm-all", "minilm-squad", "minilm-squad2"];

    /// A named recipe, all from `all-minilm-l6-v2` and none seeing the held-out articles:
    /// * `minilm-all` ([`ReaderRecipe::default_minilm`]): SQuAD training articles'
    ///   answerable questions + RAG Mini Wikipedia + NQ-open distant supervision;
    /// * `minilm-squad`: the SQuAD training articles' answerable questions only;
    /// * `minilm-squad2`: `minilm-all` plus the training articles' unanswerable questions
    ///   (target `[CLS]`), for the SQuAD 2.0-style reader with a null threshold; the default
    ///   run trains on a seeded sample of [`SQUAD2_DEFAULT_FEATURES`] windows.
    ///
    /// `full` doubles the epochs (four), trains on every window and appends `-full` to the
    /// name.
    pub fn named(name: &str, full: bool) -> Result<Self> {
        let mut r = ReaderRecipe::default_minilm();
        match name {
            "minilm-all" => {}
            "minilm-squad" => {
                r.supervision.rag_mini = false;
                r.supervision.nq = false;
            }
            "minilm-squad2" => {
                r.supervision.squad_unanswerable = true;
                // The unanswerable questions add ~2,200 windows; a seeded sample keeps the
                // default run on minilm-all's budget (416 updates of 16 over two epochs).
                r.max_features = Some(SQUAD2_DEFAULT_FEATURES);
            }
            other => {
                return Err(Error::param(
                    "recipe",
                    format!(
                        "unknown recipe `{other}` (one of {})",
                        Self::NAMES.join(", ")
                    ),
                ))
            }
        }
        r.name = name.to_string();
        if full {
            r.name.push_str("-full");
            r.train.epochs = 4;
            r.max_features = None;
        }
        Ok(r)
    }

    /// The recipe `name` ([`ReaderRecipe::named`]) at `scale`: quick trains one epoch on a
    /// seeded sample of [`QUICK_READER_FEATURES`] windows (200 updates of 16) at peak learning
    /// rate [`QUICK_READER_LR`], `minilm-squad2` [`QUICK_SQUAD2_EPOCHS`] epochs (labelled
    /// `<name>-quick` in records and folders); default and paper are the published recipe.
    /// The scale is this argument only: a name never carries it.
    pub fn at_scale(name: &str, scale: crate::env::Scale) -> Result<Self> {
        let mut r = Self::named(name, false)?;
        if scale == crate::env::Scale::Quick {
            r.name = format!("{name}-quick");
            r.train.epochs = if name == "minilm-squad2" {
                QUICK_SQUAD2_EPOCHS
            } else {
                1
            };
            r.train.lr = QUICK_READER_LR;
            r.max_features = Some(QUICK_READER_FEATURES);
        }
        Ok(r)
    }

    /// The asset names the recipe reads.
    pub fn inputs(&self) -> Vec<&str> {
        supervision_inputs(&self.base, &self.supervision)
    }

    /// The cache key: sha256 of [`READER_CACHE_VERSION`], the recipe (its name aside: a
    /// label, not configuration) and every input file's sha256.
    pub fn key(&self, assets: &Assets) -> Result<String> {
        let unnamed = ReaderRecipe {
            name: String::new(),
            ..self.clone()
        };
        recipe_key(assets, READER_CACHE_VERSION, &unnamed, self.inputs())
    }
}

/// The asset names whose content a model trained from `base` on `sup` depends on.
pub fn supervision_inputs<'a>(base: &'a str, sup: &Supervision) -> Vec<&'a str> {
    let mut v = vec![base, "squad-v2-dev-half"];
    if sup.rag_mini {
        v.push("rag-mini-wikipedia");
    }
    if sup.nq {
        v.push("nq-open");
        v.extend(WIKIPEDIA_CORPORA);
    }
    v
}

/// A trained model's cache key: the first 16 hex digits of the sha256 of `version`, the
/// JSON of `recipe` (pass it without its name: a label, not configuration) and every
/// input asset file's name and sha256.
pub fn recipe_key<T: Serialize>(
    assets: &Assets,
    version: &str,
    recipe: &T,
    inputs: Vec<&str>,
) -> Result<String> {
    let mut h = Sha256::new();
    let mut field = |b: &[u8]| {
        h.update((b.len() as u64).to_le_bytes());
        h.update(b);
    };
    field(version.as_bytes());
    field(serde_json::to_string(recipe)?.as_bytes());
    for (file, sha) in assets.input_checksums(inputs)? {
        field(file.as_bytes());
        field(sha.as_bytes());
    }
    Ok(hex::encode(h.finalize())[..16].to_string())
}

pub use crate::read::extractive::load_tokenizer;

/// Everything the supervision sources produced.
pub struct SupervisionData {
    /// Training examples, in source order.
    pub train: Vec<SpanExample>,
    /// Held-out SQuAD questions (answerable and not).
    pub held_out: Vec<SpanExample>,
    /// SQuAD training-article questions (answerable and not), for choosing a null threshold.
    pub squad_train_all: Vec<SpanExample>,
    /// RAG Mini test questions (never trained on).
    pub rag_test: Vec<QaExample>,
    /// NQ question ids used for training (keep them out of NQ evaluations).
    pub nq_used: Vec<String>,
    /// Counts per source.
    pub counts: Vec<SourceCounts>,
    /// Training article titles.
    pub train_articles: Vec<String>,
}

/// The Wikipedia corpora as 100-word windows (`{corpus}:{doc}#{w}` ids), as the NQ
/// experiment cuts them.
pub fn wikipedia_windows(assets: &Assets) -> Result<Vec<Passage>> {
    let chunker = SlidingWindowParams::default()
        .window(100)
        .overlap(0)
        .check()?;
    let mut out = Vec::new();
    for c in WIKIPEDIA_CORPORA {
        let docs = wikipedia_corpus(assets, c)?;
        for mut p in chunker.chunk_all(&docs)? {
            p.id = format!("{c}:{}", p.id);
            out.push(p);
        }
    }
    Ok(out)
}

/// Build the supervision of `sup`.
pub fn supervision(assets: &Assets, sup: &Supervision) -> Result<SupervisionData> {
    let split = qa_data::squad_examples(
        &assets.resolve("squad-v2-dev-half", "dev-v2.0.json")?,
        &HELD_OUT_ARTICLES,
    )?;
    let mut train = Vec::new();
    let mut counts = Vec::new();
    let n_ans = split.train.iter().filter(|e| e.answer.is_some()).count();
    let n_un = split.train.len() - n_ans;
    let mut c = SourceCounts {
        source: "squad-v2-dev-half training articles".into(),
        questions: split.train.len(),
        ..Default::default()
    };
    for e in &split.train {
        if (e.answer.is_some() && sup.squad_answerable)
            || (e.answer.is_none() && sup.squad_unanswerable)
        {
            train.push(e.clone());
        }
    }
    c.located = train.len();
    if !sup.squad_answerable {
        c.unlocated
            .insert("answerable: not in this recipe".into(), n_ans);
    }
    if !sup.squad_unanswerable {
        c.unlocated
            .insert("unanswerable: not in this recipe".into(), n_un);
    }
    counts.push(c);
    let mut rag_test = Vec::new();
    let (docs, qs) = rag_mini::load_csv(
        &assets.resolve("rag-mini-wikipedia", "infos.csv")?,
        &assets.resolve("rag-mini-wikipedia", "questions.csv")?,
    )?;
    let rag =
        qa_data::locate_rag_mini(&docs, &qs, sup.split_seed, sup.rag_test_percent, sup.bm25_k)?;
    rag_test.extend(rag.test.iter().cloned());
    if sup.rag_mini {
        train.extend(rag.train.iter().cloned());
        counts.push(rag.counts.clone());
    }
    let mut nq_used = Vec::new();
    if sup.nq {
        let passages = wikipedia_windows(assets)?;
        let nq = nq_open::load(
            &assets.resolve("nq-open", "NQ-open.dev.jsonl")?,
            crate::load::question_set::BadRecords::Skip,
        )?;
        let (mut ex, mut c) = qa_data::nq_distant(&passages, &nq.questions, sup.bm25_k)?;
        // The questions the loader left out are counted as considered and not used.
        if !nq.skipped.is_empty() {
            c.questions += nq.skipped.len();
            *c.unlocated
                .entry("no gold answer that normalises to something".to_string())
                .or_default() += nq.skipped.len();
        }
        if let Some(m) = sup.nq_max {
            ex.truncate(m);
        }
        nq_used = ex
            .iter()
            .map(|e| e.id.trim_start_matches("nq:").to_string())
            .collect();
        train.extend(ex);
        counts.push(c);
    }
    let squad_train_all = split.train.clone();
    Ok(SupervisionData {
        train,
        held_out: split.held_out,
        squad_train_all,
        rag_test,
        nq_used,
        counts,
        train_articles: split.train_articles,
    })
}

/// A trained reader in the cache.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TrainedReader {
    /// The recipe.
    pub recipe: ReaderRecipe,
    /// Its cache key.
    pub key: String,
    /// The Hugging Face layout checkpoint (`model.safetensors`, `config.json`, `tokenizer.json`).
    pub model_dir: PathBuf,
    /// Training features.
    pub features: usize,
    /// Training seconds (updates only) and examples (features) per second.
    pub train_seconds: f64,
    /// Features per second.
    pub examples_per_second: f64,
    /// Counts per supervision source.
    pub counts: Vec<SourceCounts>,
    /// NQ question ids used in training.
    pub nq_used: Vec<String>,
    /// `uptime` when the run ended.
    pub load: String,
}

impl super::checkpoint::RunRecord for TrainedReader {
    fn run_paths(&mut self) -> Vec<&mut PathBuf> {
        vec![&mut self.model_dir]
    }
}

/// The load average (`/proc/loadavg`), for numbers measured on a shared machine.
pub use crate::machine::load_average;

/// Features of the recipe's training examples.
pub fn training_features(
    tok: &Tokenizer,
    data: &SupervisionData,
    p: &WindowParams,
) -> Result<Vec<Feature>> {
    qa::make_features(tok, &data.train, p)
}

/// Train `recipe` unless `cache_root/<key>/done.json` exists (then load it). A run
/// interrupted earlier resumes from `cache_root/<key>/state/`.
pub fn train_or_load(
    assets: &Assets,
    recipe: &ReaderRecipe,
    cache_root: &Path,
    data: &SupervisionData,
) -> Result<(TrainedReader, Option<TrainLog>)> {
    let key = recipe.key(assets)?;
    let dir = cache_root.join(&key);
    if let Some(found) = super::checkpoint::read_done::<TrainedReader>(&dir)? {
        return Ok(found);
    }
    let tok_path = assets.resolve(&recipe.base, "tokenizer.json")?;
    let tok = load_tokenizer(&tok_path)?;
    let mut feats = training_features(&tok, data, &recipe.windows)?;
    if let Some(m) = recipe.max_features {
        use rand::seq::SliceRandom;
        use rand::SeedableRng;
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(recipe.train.seed);
        feats.shuffle(&mut rng);
        feats.truncate(m);
    }
    let model = QaTrainModel::from_checkpoint(
        &assets.resolve(&recipe.base, "config.json")?,
        &assets.resolve(&recipe.base, "model.safetensors")?,
        recipe.init_seed,
    )?;
    let n = feats.len();
    let data_f = QaFeatures(feats);
    let log = super::train(
        &model,
        &model.vars,
        &data_f,
        &recipe.train,
        Some(&dir.join("state")),
        Stop::End,
    )?;
    let model_dir = dir.join("model");
    model.save_pretrained(&model_dir, &tok_path)?;
    let t = TrainedReader {
        recipe: recipe.clone(),
        key,
        model_dir,
        features: n,
        train_seconds: log.seconds(),
        examples_per_second: log.examples_per_second(),
        counts: data.counts.clone(),
        nq_used: data.nq_used.clone(),
        load: load_average(),
    };
    let done = dir.join("done.json");
    std::fs::write(&done, serde_json::to_vec_pretty(&t)?).map_err(|e| Error::io(&done, e))?;
    Ok((t, Some(log)))
}

/// True when `recipe`'s training has finished (`cache_root/<key>/done.json` exists).
pub fn is_trained(assets: &Assets, recipe: &ReaderRecipe, cache_root: &Path) -> Result<bool> {
    Ok(cache_root
        .join(recipe.key(assets)?)
        .join("done.json")
        .exists())
}

/// The latest checkpoint of an unfinished run of `recipe` (training interrupted, or
/// still going) exported in the Hugging Face layout to `cache_root/<key>/partial-<step>/`,
/// with its log; `None` when no checkpoint exists. The run itself resumes from the same
/// checkpoint with [`train_or_load`].
pub fn partial_checkpoint(
    assets: &Assets,
    recipe: &ReaderRecipe,
    cache_root: &Path,
    data: &SupervisionData,
) -> Result<Option<(TrainedReader, TrainLog)>> {
    let key = recipe.key(assets)?;
    let dir = cache_root.join(&key);
    let Some(st) = super::checkpoint::read_state(&dir.join("state"))? else {
        return Ok(None);
    };
    let steps = st.log.steps.len();
    let config = crate::read::extractive::QaConfig::from_base_file(
        &assets.resolve(&recipe.base, "config.json")?,
    )?;
    let weights = dir.join("state").join("weights.safetensors");
    let (vars, _) =
        crate::read::extractive::QaModel::trainable(&config, &weights, recipe.init_seed)?;
    let model_dir = dir.join(format!("partial-{steps}"));
    let tok_path = assets.resolve(&recipe.base, "tokenizer.json")?;
    crate::read::extractive::save_pretrained(&vars, &config, &tok_path, &model_dir)?;
    let tok = load_tokenizer(&tok_path)?;
    let features = training_features(&tok, data, &recipe.windows)?.len();
    let t = TrainedReader {
        recipe: recipe.clone(),
        key,
        model_dir,
        features,
        train_seconds: st.log.seconds(),
        examples_per_second: st.log.examples_per_second(),
        counts: data.counts.clone(),
        nq_used: data.nq_used.clone(),
        load: load_average(),
    };
    Ok(Some((t, st.log)))
}

/// EM and F1 (percent, SQuAD's normalisation) of `preds` against each example's golds;
/// a missing prediction scores 0.
pub fn em_f1(examples: &[SpanExample], preds: &[Option<String>]) -> (f64, f64) {
    let n = examples.len().max(1) as f64;
    let mut em = 0.0;
    let mut f1 = 0.0;
    for (e, p) in examples.iter().zip(preds) {
        let p = p.as_deref().unwrap_or("");
        em += crate::evaluate::qa::exact_match(p, &e.golds);
        f1 += crate::evaluate::qa::f1(p, &e.golds);
    }
    (100.0 * em / n, 100.0 * f1 / n)
}

/// Each example read by `reader` from its own context (the gold paragraph given): the
/// decoded spans (n-best, null score) of the reader's windows.
pub fn read_gold(reader: &ExtractiveReader, examples: &[SpanExample]) -> Result<Vec<Decoded>> {
    let mut bar = crate::progress::bar(examples.len(), "reading");
    let mut out = Vec::with_capacity(examples.len());
    for e in examples {
        let ctx = [Context::new(e.id.clone(), e.context.clone())];
        out.push(reader.read_spans(&e.question, &ctx)?.0);
        crate::progress::tick(&mut bar, 1);
    }
    Ok(out)
}

/// Each example's answer text by [`read_gold`] (`None`: a null answer).
pub fn predict_gold(
    reader: &ExtractiveReader,
    examples: &[SpanExample],
) -> Result<Vec<Option<String>>> {
    let decoded = read_gold(reader, examples)?;
    Ok(examples
        .iter()
        .zip(&decoded)
        .map(|(e, d)| {
            d.answer()
                .map(|s| char_slice(&e.context, s.start_char, s.end_char).to_string())
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::Scale;

    #[test]
    fn quick_recipes_train_one_epoch_but_squad2_two() {
        for name in ["minilm-all", "minilm-squad", "minilm-squad2"] {
            let r = ReaderRecipe::at_scale(name, Scale::Quick).unwrap();
            let squad2 = name.starts_with("minilm-squad2");
            assert_eq!(
                r.train.epochs,
                if squad2 { QUICK_SQUAD2_EPOCHS } else { 1 },
                "{name}"
            );
            assert_eq!(r.max_features, Some(QUICK_READER_FEATURES), "{name}");
            assert!(
                r.name.ends_with("-quick") && !r.name.ends_with("-quick-quick"),
                "{}",
                r.name
            );
        }
        assert_eq!(
            ReaderRecipe::at_scale("minilm-squad2", Scale::Default).unwrap(),
            ReaderRecipe::named("minilm-squad2", false).unwrap()
        );
        // The scale is a value, never a name suffix.
        let e = ReaderRecipe::at_scale("minilm-all-quick", Scale::Quick)
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown recipe `minilm-all-quick`"), "{e}");
    }

    #[test]
    fn a_trained_reader_record_names_its_model_folder_for_rebasing() {
        use super::super::checkpoint::RunRecord;
        let mut t = TrainedReader {
            recipe: ReaderRecipe::named("minilm-all", false).unwrap(),
            key: "k".into(),
            model_dir: PathBuf::from("/old/k/model"),
            features: 0,
            train_seconds: 0.0,
            examples_per_second: 0.0,
            counts: vec![],
            nq_used: vec![],
            load: String::new(),
        };
        let paths = t.run_paths();
        assert_eq!(paths.len(), 1);
        assert_eq!(*paths[0], PathBuf::from("/old/k/model"));
    }
}
