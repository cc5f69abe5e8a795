//! Report 003's table: TF-IDF, late-interaction (MaxSim) re-rank and MaxSim end-to-end
//! retrieval on SQuAD 2.0 dev (the CS224N half), with report 003's token-relevance views.
//!
//! Passages: the 646 SQuAD contexts. Queries: the answerable questions, each with one
//! relevant passage, its own context (like report 003's FANDOM-QA).
//!
//! | system | what |
//! |---|---|
//! | TF-IDF | cosine over TF-IDF vectors (report 003's first stage) |
//! | MaxSim re-rank | TF-IDF top `rerank_depth` re-scored by mean-MaxSim |
//! | MaxSim end-to-end (λ) | each query token's `k̂ = ⌈k/λ⌉` nearest passage tokens (exact FAISS inner product over every passage token), their passages ranked by exact mean-MaxSim; `k = depth` |
//! | MaxSim end-to-end, approximate | centroid pruning (`approx_nlist` k-means cells, `approx_nprobe` probed per query token, the `approx_candidates` best passages by centroid interaction), exact mean-MaxSim on those; `approx_nlist = 0` drops the row |
//! | trained MaxSim d (held-out only) | TF-IDF top `rerank_depth` re-ranked through a trained ColBERT projection ([`crate::train::colbert`]) |
//!
//! Token vectors are raw 384-d all-MiniLM-L6-v2 last hidden states (L2-normalised, no
//! projection, no `[Q]`/`[D]` markers) unless a row says it is trained. With 646 passages
//! Recall@1000 is trivially 1, so the table reports MRR@10 and Recall@1, @10 and @50.
//! Paired randomisation tests compare each system with TF-IDF.
//!
//! `held_out` asks only the questions of the five held-out articles (the trained
//! projections never saw them; the corpus stays all 646 contexts) and adds a re-rank row
//! per trained projection in `colbert_dims`; `colbert_ablation` adds diagnostic rows (the
//! markers on raw vectors, the untrained PCA head, a head trained with the markers).
//!
//! | scale | questions | trained projections (held-out) |
//! |---|---|---|
//! | quick | the first 300 | d = 128 on 200 groups |
//! | default, paper | all | d = 24, 32, 64, 128 on 800 groups, with the ablation rows |

use super::{Env, Scale};
use crate::chunk::{Chunker, WholeDocument};
use crate::display::Table;
use crate::evaluate::{evaluate, significance, Metric, MetricResult};
use crate::load::squad;
use crate::rerank::late_interaction::{
    ApproxSearch, ApproxTokenIndex, CentroidParams, LateInteraction, MaxSimApprox, MaxSimEndToEnd,
    MaxSimReranker, Projection, RelevanceParams, TokenIndex, TokenStore,
};
use crate::rerank::{PassageLookup, RerankedRetriever};
use crate::results::ResultDir;
use crate::retrieve::analyzer::Analyzer;
use crate::retrieve::tfidf::{TfIdf, TfIdfVariant};
use crate::retrieve::Retriever;
use crate::{Error, Passage, QaExample, Qrels, Query, Result, Run};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

/// The study's result folder at the default scale (`-heldout` for the held-out table).
pub const NAME: &str = "late-interaction";
/// The data set asset.
pub const DATA: &str = "squad-v2-dev-half";
/// The table's metrics.
pub const METRICS: [Metric; 4] = [
    Metric::Mrr(10),
    Metric::Recall(1),
    Metric::Recall(10),
    Metric::Recall(50),
];

/// The study's parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LateParams {
    /// Sizes; part of the result's name.
    pub scale: Scale,
    /// Only the questions of the five held-out articles, with the trained rows.
    pub held_out: bool,
    /// The first this many answerable questions (0 = all).
    pub questions: usize,
    /// Passages ranked per query (the `k` of k̂ = k/λ for end-to-end).
    pub depth: usize,
    /// TF-IDF candidates re-ranked by MaxSim.
    pub rerank_depth: usize,
    /// λ values of the end-to-end rows (k̂ = ⌈k/λ⌉); report 003's best was 2.
    pub lambdas: Vec<f32>,
    /// k-means cells of the approximate end-to-end row (0: no such row).
    pub approx_nlist: usize,
    /// Cells probed per query token by the approximate row.
    pub approx_nprobe: usize,
    /// Passages the approximate row scores exactly.
    pub approx_candidates: usize,
    /// Questions over which end-to-end candidate counts are measured.
    pub candidate_sample: usize,
    /// k̃ of the token-relevance views (report 003: 2).
    pub k_tilde: usize,
    /// A re-rank row per trained ColBERT projection of these dimensions (held-out only).
    pub colbert_dims: Vec<usize>,
    /// The diagnostic rows of the trained projection (held-out only).
    pub colbert_ablation: bool,
    /// Training groups of the trained projections (0 = all).
    pub colbert_groups: usize,
    /// Trials of the randomisation tests.
    pub trials: usize,
    /// Seed of the randomisation tests.
    pub seed: u64,
}

impl LateParams {
    /// The published parameters at `scale`: report 003's table, or with `held_out` the
    /// held-out table with the trained projections.
    pub fn at_scale(scale: Scale, held_out: bool) -> Self {
        let quick = scale == Scale::Quick;
        LateParams {
            scale,
            held_out,
            questions: if quick { 300 } else { 0 },
            depth: 100,
            rerank_depth: 100,
            lambdas: vec![2.0],
            approx_nlist: 1024,
            approx_nprobe: 1,
            approx_candidates: 64,
            candidate_sample: 200,
            k_tilde: 2,
            colbert_dims: match (held_out, quick) {
                (false, _) => vec![],
                (true, true) => vec![128],
                (true, false) => vec![24, 32, 64, 128],
            },
            colbert_ablation: held_out && !quick,
            colbert_groups: if quick {
                crate::pipeline::trained::QUICK_COLBERT_GROUPS
            } else {
                800
            },
            trials: 10_000,
            seed: 42,
        }
    }

    /// The result folder's name at the default scale.
    pub fn name(&self) -> String {
        if self.held_out {
            format!("{NAME}-heldout")
        } else {
            NAME.to_string()
        }
    }

    /// Check the values: trained rows only on the held-out questions, at least one λ
    /// (the token-relevance views need an end-to-end row), positive λ, depths ≥ 1, at
    /// least one trial.
    pub fn check(self) -> Result<LateValid> {
        if (!self.colbert_dims.is_empty() || self.colbert_ablation) && !self.held_out {
            return Err(Error::param(
                "held_out",
                "trained rows (colbert_dims, colbert_ablation) need the held-out questions: the other questions are training data",
            ));
        }
        if self.lambdas.is_empty() {
            return Err(Error::param(
                "lambdas",
                "at least one end-to-end λ (the token-relevance views read its run)",
            ));
        }
        if let Some(l) = self.lambdas.iter().find(|l| l.is_nan() || **l <= 0.0) {
            return Err(Error::param("lambdas", format!("λ = {l} is not positive")));
        }
        if self.depth == 0 || self.rerank_depth == 0 {
            return Err(Error::param("depth", "depths must be at least 1"));
        }
        if self.trials == 0 {
            return Err(Error::param("trials", "at least one trial"));
        }
        Ok(LateValid(self))
    }
}

crate::env::checked_params!(LateValid, LateParams, "Checked [`LateParams`].");

impl LateValid {
    /// What `config.json` records: the parameters, the metrics, the token encoder, the
    /// sha256 of the data set's and encoder's files and the program's sha256.
    pub fn resolved(&self, env: &Env) -> Result<super::Resolved<'_, LateParams>> {
        super::Resolved::new(
            env,
            &self.0,
            [DATA, "all-minilm-l6-v2"],
            serde_json::json!({
                "data": DATA,
                "metrics": METRICS.iter().map(Metric::name).collect::<Vec<_>>(),
                "token_encoder": "all-minilm-l6-v2 last hidden states, raw 384-d, L2-normalised (LateInteraction::load_minilm)",
            }),
        )
    }
}

/// One system's run.
#[derive(Debug, Clone)]
pub struct LateSystem {
    /// Row label.
    pub label: String,
    /// How many passages the system scores per query.
    pub scored: String,
    /// The retriever's own name.
    pub name: String,
    /// Its run.
    pub run: Run,
    /// Seconds for every query.
    pub seconds: f64,
}

/// A token-relevance view of one question and its gold passage.
#[derive(Debug, Clone)]
pub struct RelevanceView {
    /// Question id, question, gold passage id.
    pub query_id: String,
    /// The question.
    pub question: String,
    /// Gold passage id.
    pub gold: String,
    /// Mean-MaxSim of the pair.
    pub maxsim: f32,
    /// The HTML page.
    pub html: String,
}

/// What the study found.
#[derive(Debug, Clone)]
pub struct LateStudy {
    /// The parameters it ran with.
    pub params: LateParams,
    /// Passages in the corpus.
    pub passages: usize,
    /// `(id, question, gold passage)` of the questions asked.
    pub questions: Vec<(String, String, String)>,
    /// Token vectors in the raw store.
    pub token_vectors: usize,
    /// The token vectors' description and the encoder's label.
    pub token_encoder: (String, String),
    /// Every system, TF-IDF first.
    pub systems: Vec<LateSystem>,
    /// Metric results per system ([`METRICS`]).
    pub results: Vec<Vec<MetricResult>>,
    /// Index of the first end-to-end system (the token-relevance views' chooser).
    pub first_e2e: usize,
    /// One hit and one miss at rank 1 of that system.
    pub views: Vec<RelevanceView>,
}

fn html_page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{title}</title></head>\
         <body style=\"max-width:60em;margin:1em auto;font-family:sans-serif\">{body}</body></html>\n"
    )
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A legend-sized label: `MaxSim end-to-end (k = 100, λ = 2, k̂ = 50)` → `MaxSim end-to-end (λ = 2)`.
pub fn short_label(label: &str) -> String {
    match (label.split_once(" (k = "), label.split_once("λ = ")) {
        (Some((head, _)), Some((_, rest))) => {
            format!("{head} (λ = {})", rest.split(',').next().unwrap_or(rest))
        }
        _ => label.to_string(),
    }
}

/// The diagnostic rows of the trained projection: ColBERT's markers and `[MASK]` padding
/// on raw MiniLM vectors, the d = 128 PCA head before any update (computed exactly as
/// `train::colbert::train_or_load` starts it), and a d = 128 head trained with the
/// markers. Each is `(token encoder, label)`.
fn ablation_encoders(env: &Env, groups: usize) -> Result<Vec<(Arc<LateInteraction>, String)>> {
    use crate::train::colbert::{self, ColbertHead, ColbertRecipe, WEIGHT_NAME};
    let assets = &env.assets;
    let mut recipe = ColbertRecipe::default_minilm(128);
    recipe.max_groups = (groups > 0).then_some(groups);
    let cache = env.cache_dir("colbert");
    let plain = colbert::recipe_encoder(assets, &recipe)?;
    let set = colbert::sampled_groups(assets, &recipe)?;
    let data = colbert::group_vectors(&plain, &set.groups, recipe.negatives, &cache)?;
    let head = ColbertHead::pca(recipe.dim, &[&data.queries, &data.passages])?;
    let path = cache.join(format!(
        "pca-untrained-d{}-{}.safetensors",
        recipe.dim,
        recipe.key(assets)?
    ));
    head.save(&path)?;
    let pca = Projection::load(&path, Some(WEIGHT_NAME))?;
    let mut marked = recipe.clone();
    marked.markers = true;
    marked.name.push_str("-markers");
    let (trained_marked, _) = colbert::train_or_load(assets, &marked, &cache)?;
    Ok(vec![
        (
            Arc::new(LateInteraction::load_minilm(assets)?.with_markers(recipe.n_q)?),
            format!(
                "MaxSim raw 384-d with [Q]/[D] markers and [MASK] padding to {} (no projection)",
                recipe.n_q
            ),
        ),
        (
            Arc::new(plain.with_projection(pca)?),
            "MaxSim d = 128 PCA head, no update".into(),
        ),
        (
            Arc::new(
                colbert::recipe_encoder(assets, &marked)?
                    .with_projection(trained_marked.projection()?)?,
            ),
            "trained MaxSim d = 128 with markers, pca init".into(),
        ),
    ])
}

/// The token store of `li` over `passages` at `<dir>/<DATA>-<label>.tok` (built if absent
/// or stale).
fn store_for(li: &LateInteraction, passages: &[Passage], dir: &Path) -> Result<TokenStore> {
    li.load_or_build_store(passages, &dir.join(format!("{DATA}-{}.tok", li.label())))
}

impl super::Study for LateValid {
    type Output = LateStudy;

    fn name(&self) -> String {
        LateParams::name(self)
    }

    fn scale(&self) -> Scale {
        self.scale
    }

    fn summary_file(&self) -> &'static str {
        "metrics.md"
    }

    fn resolved(&self, env: &Env) -> Result<impl serde::Serialize + '_> {
        LateValid::resolved(self, env)
    }

    fn run(&self, env: &Env) -> Result<LateStudy> {
        run(env, self)
    }
}

/// Run every system over the questions, score, and draw the token-relevance views.
pub fn run(env: &Env, params: &LateValid) -> Result<LateStudy> {
    let p = &params.0;
    let set = squad::load(&env.assets.resolve(DATA, "dev-v2.0.json")?)?;
    let passages = WholeDocument.chunk_all(&set.contexts)?;
    let held_ctx: std::collections::HashSet<&str> = set
        .contexts
        .iter()
        .filter(|d| crate::train::qa_data::HELD_OUT_ARTICLES.contains(&d.title.as_str()))
        .map(|d| d.id.as_str())
        .collect();
    if p.held_out && held_ctx.is_empty() {
        return Err(Error::param(
            "held_out",
            format!("no context of `{DATA}` belongs to the held-out articles"),
        ));
    }
    let limit = if p.questions == 0 {
        usize::MAX
    } else {
        p.questions
    };
    let answerable: Vec<&QaExample> = set
        .examples
        .iter()
        .filter(|q| !q.is_unanswerable())
        .filter(|q| {
            !p.held_out
                || q.context_id
                    .as_deref()
                    .is_some_and(|c| held_ctx.contains(c))
        })
        .take(limit)
        .collect();
    let queries: Vec<Query> = answerable.iter().map(|q| q.to_query()).collect();
    let mut qrels = Qrels::new();
    let mut questions = Vec::with_capacity(answerable.len());
    for q in &answerable {
        let ctx = q
            .context_id
            .clone()
            .ok_or_else(|| Error::param(DATA, format!("question `{}` has no context id", q.id)))?;
        qrels
            .entry(q.id.clone())
            .or_default()
            .insert(ctx.clone(), 1);
        questions.push((q.id.clone(), q.question.clone(), ctx));
    }

    let late = Arc::new(LateInteraction::load_minilm(&env.assets)?);
    let token_vectors = format!(
        "raw {}-d all-MiniLM-L6-v2 last hidden states, L2-normalised, no projection",
        late.dim()
    );
    let store_dir = env.cache_dir("late-interaction");
    std::fs::create_dir_all(&store_dir).map_err(|e| Error::io(&store_dir, e))?;
    let store = store_for(&late, &passages, &store_dir)?;
    let store_path = store_dir.join(format!("{DATA}-{}.tok", late.label()));
    let n_vectors = store.n_vectors();
    let store = Arc::new(store);
    let tfidf = Arc::new(TfIdf::build(
        &passages,
        &Analyzer::default(),
        TfIdfVariant::cosine(),
    )?);

    let time = |label: String, r: &dyn Retriever, k: usize| -> Result<LateSystem> {
        let t0 = Instant::now();
        let mut run = Run::new();
        let mut bar = crate::progress::bar(queries.len(), &label);
        for q in &queries {
            run.insert(q.id.clone(), r.retrieve(&q.text, k)?);
            crate::progress::tick(&mut bar, 1);
        }
        Ok(LateSystem {
            label,
            scored: String::new(),
            name: r.name(),
            run,
            seconds: t0.elapsed().as_secs_f64(),
        })
    };
    let mut systems = Vec::new();
    let mut tf = time("TF-IDF (cosine)".into(), tfidf.as_ref(), p.depth)?;
    tf.scored = "every passage with a query term".into();
    systems.push(tf);
    let rerank_row =
        |li: Arc<LateInteraction>, store: Arc<TokenStore>, label: String| -> Result<LateSystem> {
            let reranker = MaxSimReranker::new(li).with_store(store)?;
            let reranked = RerankedRetriever::new(
                Box::new(tfidf.clone()),
                Box::new(reranker),
                PassageLookup::from_passages(&passages)?,
                p.rerank_depth,
            )?;
            let mut rr = time(label, &reranked, p.depth.min(p.rerank_depth))?;
            rr.scored = p.rerank_depth.to_string();
            Ok(rr)
        };
    systems.push(rerank_row(
        late.clone(),
        store.clone(),
        format!("TF-IDF top-{} → MaxSim re-rank", p.rerank_depth),
    )?);
    let per_passage_kb = |n_vectors: usize, dim: usize| {
        n_vectors as f64 / passages.len().max(1) as f64 * dim as f64 * 2.0 / 1024.0
    };
    for &d in &p.colbert_dims {
        use crate::train::colbert;
        let mut recipe = colbert::ColbertRecipe::default_minilm(d);
        recipe.max_groups = (p.colbert_groups > 0).then_some(p.colbert_groups);
        let trained = colbert::train_or_load(&env.assets, &recipe, &env.cache_dir("colbert"))?.0;
        let recipe = &trained.recipe;
        let li = Arc::new(
            colbert::recipe_encoder(&env.assets, recipe)?.with_projection(trained.projection()?)?,
        );
        let st = Arc::new(store_for(&li, &passages, &store_dir)?);
        let kb = per_passage_kb(st.n_vectors(), st.dim());
        systems.push(rerank_row(
            li,
            st,
            format!(
                "TF-IDF top-{} → trained MaxSim d = {d}, {} init{} ({kb:.1} KB/passage)",
                p.rerank_depth,
                format!("{:?}", recipe.init).to_lowercase(),
                if recipe.markers { ", markers" } else { "" }
            ),
        )?);
    }
    if p.colbert_ablation {
        for (li, label) in ablation_encoders(env, p.colbert_groups)? {
            let st = Arc::new(store_for(&li, &passages, &store_dir)?);
            systems.push(rerank_row(
                li,
                st,
                format!("TF-IDF top-{} → {label}", p.rerank_depth),
            )?);
        }
    }
    let store = Arc::try_unwrap(store).unwrap_or_else(|shared| (*shared).clone());
    let first_e2e = systems.len();
    let mut e2e = MaxSimEndToEnd::from_index(late.clone(), TokenIndex::build(store)?)?;
    for &lambda in &p.lambdas {
        e2e = e2e.with_lambda(lambda)?;
        let k_hat = e2e.k_hat(p.depth);
        let mut sys = time(
            format!(
                "MaxSim end-to-end (k = {}, λ = {lambda}, k̂ = {k_hat})",
                p.depth
            ),
            &e2e,
            p.depth,
        )?;
        // Candidate passages (exactly MaxSim-scored) per query, over the first questions.
        let sample = &queries[..queries.len().min(p.candidate_sample)];
        let mut counts = Vec::with_capacity(sample.len());
        for q in sample {
            let qv = late.encode_query(&q.text)?;
            counts.push(e2e.index().candidates(&qv.vectors, k_hat)?.len());
        }
        let mean = counts.iter().sum::<usize>() as f64 / counts.len().max(1) as f64;
        sys.scored = format!("{mean:.0} (mean, first {} questions)", sample.len());
        systems.push(sys);
    }
    if p.approx_nlist > 0 {
        let cp = CentroidParams::new(p.approx_nlist);
        let path = ApproxTokenIndex::path_next_to(&store_path, &cp);
        let index =
            ApproxTokenIndex::load_or_build(Arc::new(e2e.index().store().clone()), cp, &path)?;
        let search = ApproxSearch {
            nprobe: p.approx_nprobe,
            candidates: p.approx_candidates,
        };
        let approx = MaxSimApprox::new(late.clone(), Arc::new(index), search)?;
        let mut sys = time(
            format!(
                "MaxSim end-to-end, approximate (nlist {}, nprobe {}, {} candidates)",
                p.approx_nlist, p.approx_nprobe, p.approx_candidates
            ),
            &approx,
            p.depth,
        )?;
        sys.scored = p.approx_candidates.min(passages.len()).to_string();
        systems.push(sys);
    }
    let results: Vec<Vec<MetricResult>> = systems
        .iter()
        .map(|s| evaluate(&s.run, &qrels, &METRICS))
        .collect::<Result<_>>()?;

    // Token relevance for two pairs: one hit and one miss at rank 1 of the first
    // end-to-end system.
    let rank = |run: &Run, qid: &str, gold: &str| -> Option<usize> {
        run.get(qid)?
            .iter()
            .position(|h| h.id == gold)
            .map(|i| i + 1)
    };
    let e2e_system = &systems[first_e2e];
    let hit = questions
        .iter()
        .zip(&answerable)
        .find(|((id, _, g), _)| rank(&e2e_system.run, id, g) == Some(1));
    let miss = questions
        .iter()
        .zip(&answerable)
        .find(|((id, _, g), _)| rank(&e2e_system.run, id, g).is_some_and(|r| r > 1));
    let lookup = PassageLookup::from_passages(&passages)?;
    let rel = RelevanceParams {
        k_tilde: p.k_tilde,
        bandwidth: None,
    };
    let mut views = Vec::new();
    for (i, ((id, question, gold), q)) in [hit, miss].into_iter().flatten().enumerate() {
        let text = lookup.require(gold)?;
        let tr = late.token_relevance(question, text, &rel)?;
        let ranks: Vec<String> = systems
            .iter()
            .map(|s| {
                format!(
                    "{}: {}",
                    escape(&s.label),
                    rank(&s.run, id, gold)
                        .map(|r| r.to_string())
                        .unwrap_or_else(|| format!(">{}", p.depth))
                )
            })
            .collect();
        let top1 = e2e_system
            .run
            .get(id)
            .and_then(|h| h.first())
            .map(|h| h.id.clone())
            .unwrap_or_default();
        let body = format!(
            "<h2>Token relevance, example {} (report 003 §5)</h2>\
             <p><b>Question</b> ({}): {}<br><b>Gold answers</b>: {}<br><b>Gold passage</b>: {}<br>\
             <b>Rank of the gold passage</b>: {}<br><b>Chosen by</b>: {} (example 1: its first \
             question answered at rank 1; example 2: its first miss at rank 1)<br>\
             <b>Its top 1</b>: {}</p>\
             <p style=\"color:#555\">Token vectors: {} (not a trained ColBERT); k̃ = {}; \
             query wordpieces: {}</p>{}",
            i + 1,
            escape(id),
            escape(question),
            escape(&q.answers.join(" | ")),
            escape(gold),
            ranks.join("; "),
            escape(&e2e_system.label),
            escape(&top1),
            escape(&token_vectors),
            p.k_tilde,
            escape(&tr.query_tokens.join(" ")),
            tr.to_html_all()
        );
        views.push(RelevanceView {
            query_id: id.clone(),
            question: question.clone(),
            gold: gold.clone(),
            maxsim: tr.score,
            html: html_page(&format!("Token relevance {}", i + 1), &body),
        });
    }
    Ok(LateStudy {
        params: p.clone(),
        passages: passages.len(),
        questions,
        token_vectors: n_vectors,
        token_encoder: (token_vectors, late.label()),
        systems,
        results,
        first_e2e,
        views,
    })
}

impl LateStudy {
    /// Rank of the gold passage of question `qi` in system `si`'s run.
    pub fn rank(&self, si: usize, qi: usize) -> Option<usize> {
        let (id, _, gold) = &self.questions[qi];
        self.systems[si]
            .run
            .get(id)?
            .iter()
            .position(|h| &h.id == gold)
            .map(|i| i + 1)
    }

    /// Report 003's table: the metrics per system (marked against TF-IDF), passages scored
    /// and time per query; and the significance tests behind the marks.
    pub fn tables(&self) -> Result<(Table, Table)> {
        let p = &self.params;
        let mut table = Table::new([
            "system",
            "MRR@10",
            "Recall@1",
            "Recall@10",
            "Recall@50",
            "passages scored/query",
            "ms/query",
        ])
        .caption(format!(
            "SQuAD 2.0 dev (CS224N half): {} answerable questions, {} passages, one relevant passage each. \
             Token vectors: {} (`{}`; not a trained ColBERT). † / †† : randomisation test against TF-IDF \
             ({} trials, seed {}), p < 0.05 / p < 0.01.",
            self.questions.len(),
            self.passages,
            self.token_encoder.0,
            self.token_encoder.1,
            p.trials,
            p.seed
        ));
        let mut sig = Table::new(
            ["system", "metric"]
                .into_iter()
                .chain(significance::Comparison::COLUMNS),
        );
        for (si, s) in self.systems.iter().enumerate() {
            let mut row = vec![s.label.clone()];
            for (mi, m) in self.results[si].iter().enumerate() {
                let mut mark = "";
                if si > 0 {
                    let b = &self.results[0][mi];
                    let c = significance::compare(&m.per_query, &b.per_query, p.trials, p.seed)?;
                    sig.push(
                        [s.label.clone(), m.name.clone()]
                            .into_iter()
                            .chain(c.cells()),
                    )?;
                    mark = c.marker();
                }
                row.push(format!("{:.4}{mark}", m.mean));
            }
            row.push(s.scored.clone());
            row.push(format!(
                "{:.2}",
                1e3 * s.seconds / self.questions.len().max(1) as f64
            ));
            table.push(row)?;
        }
        Ok((table, sig))
    }

    /// The gold passage's rank per question and system.
    pub fn per_query(&self) -> Result<Table> {
        let mut t = Table::new(
            ["query_id", "question", "gold_passage"]
                .into_iter()
                .map(String::from)
                .chain(self.systems.iter().map(|s| format!("rank: {}", s.label))),
        );
        for (qi, (id, question, gold)) in self.questions.iter().enumerate() {
            let mut row = vec![id.clone(), question.clone(), gold.clone()];
            for si in 0..self.systems.len() {
                row.push(
                    self.rank(si, qi)
                        .map(|r| r.to_string())
                        .unwrap_or_else(|| format!(">{}", self.params.depth)),
                );
            }
            t.push(row)?;
        }
        Ok(t)
    }

    /// Recall@k (share of questions whose passage is in the top k) per system, k = 1…50:
    /// `(label, [(k, percent)])`.
    pub fn recall_curves(&self) -> Vec<(String, Vec<(f64, f64)>)> {
        let curve_k = 50.min(self.params.depth);
        let n = self.questions.len().max(1) as f64;
        (0..self.systems.len())
            .map(|si| {
                let ranks: Vec<Option<usize>> = (0..self.questions.len())
                    .map(|qi| self.rank(si, qi))
                    .collect();
                let pts = (1..=curve_k)
                    .map(|k| {
                        let r =
                            ranks.iter().filter(|x| x.is_some_and(|x| x <= k)).count() as f64 / n;
                        (k as f64, 100.0 * r)
                    })
                    .collect();
                (self.systems[si].label.clone(), pts)
            })
            .collect()
    }

    /// The Recall@k curves as a table.
    pub fn curve_table(&self) -> Result<Table> {
        let mut t = Table::new(["system", "k", "recall"]);
        for (label, pts) in self.recall_curves() {
            for (k, r) in pts {
                t.push([label.clone(), format!("{k}"), format!("{:.4}", r / 100.0)])?;
            }
        }
        Ok(t)
    }

    /// Recall@k against k (log x), one line per system.
    #[cfg(feature = "plot")]
    pub fn figure(&self) -> crate::plot::Lines {
        crate::plot::Lines {
            title: format!(
                "{}: Recall@k, {} questions, {} passages",
                if self.params.held_out {
                    "SQuAD 2.0 dev half, five held-out articles' questions"
                } else {
                    "SQuAD 2.0 dev half"
                },
                self.questions.len(),
                self.passages
            ),
            x_label: "k".into(),
            y_label: "questions whose passage is in the top k (%)".into(),
            lines: self
                .recall_curves()
                .into_iter()
                .map(|(label, points)| crate::plot::Line {
                    label: short_label(&label),
                    points,
                })
                .collect(),
            log_x: true,
            y_range: None,
            size: (1100, 650),
        }
    }

    /// The table's caption, the table and the significance tests as Markdown.
    pub fn markdown(&self) -> Result<String> {
        let (table, sig) = self.tables()?;
        Ok(format!(
            "{}\nSignificance against TF-IDF:\n\n{}",
            table.to_markdown(),
            sig.to_markdown()
        ))
    }

    /// The numbers `manifest.json` records.
    pub fn summary(&self) -> serde_json::Value {
        let mut summary = serde_json::Map::new();
        for (si, s) in self.systems.iter().enumerate() {
            let mut m = serde_json::Map::new();
            m.insert("name".into(), s.name.clone().into());
            for r in &self.results[si] {
                m.insert(r.name.clone(), r.mean.into());
            }
            m.insert("seconds".into(), s.seconds.into());
            summary.insert(s.label.clone(), serde_json::Value::Object(m));
        }
        summary.insert("queries".into(), self.questions.len().into());
        summary.insert("passages".into(), self.passages.into());
        summary.insert("token_vectors".into(), self.token_vectors.into());
        summary.insert(
            "token_relevance_examples".into(),
            self.views
                .iter()
                .map(|v| serde_json::json!({"query_id": v.query_id, "question": v.question, "gold": v.gold, "maxsim": v.maxsim}))
                .collect::<Vec<_>>()
                .into(),
        );
        summary.insert(
            "token_relevance_system".into(),
            self.systems[self.first_e2e].label.clone().into(),
        );
        serde_json::Value::Object(summary)
    }

    /// `metrics.csv`/`.md`, `significance.csv`, `per_query.csv`, `recall_at_k.csv`,
    /// `token_relevance_{1,2}.html` and (feature `plot`) `recall_at_k.png`/`.svg`.
    pub fn write(&self, out: &ResultDir) -> Result<()> {
        let (table, sig) = self.tables()?;
        table.write_csv(&out.path("metrics.csv"))?;
        sig.write_csv(&out.path("significance.csv"))?;
        self.per_query()?.write_csv(&out.path("per_query.csv"))?;
        self.curve_table()?
            .write_csv(&out.path("recall_at_k.csv"))?;
        for (i, v) in self.views.iter().enumerate() {
            let path = out.path(&format!("token_relevance_{}.html", i + 1));
            std::fs::write(&path, &v.html).map_err(|e| Error::io(&path, e))?;
        }
        let md = out.path("metrics.md");
        std::fs::write(&md, self.markdown()?).map_err(|e| Error::io(&md, e))?;
        #[cfg(feature = "plot")]
        crate::plot::render(&self.figure())?.save(out.out_dir(), "recall_at_k")?;
        Ok(())
    }
}

impl super::Outputs for LateStudy {
    fn write(&self, out: &ResultDir) -> Result<()> {
        LateStudy::write(self, out)
    }
    fn markdown(&self) -> Result<String> {
        LateStudy::markdown(self)
    }
    fn summary(&self) -> Result<serde_json::Value> {
        Ok(LateStudy::summary(self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scales_and_the_held_out_rule() {
        let q = LateParams::at_scale(Scale::Quick, false).check().unwrap();
        assert_eq!((q.questions, q.colbert_dims.len()), (300, 0));
        let h = LateParams::at_scale(Scale::Default, true).check().unwrap();
        assert_eq!(h.colbert_dims, [24, 32, 64, 128]);
        assert!(h.colbert_ablation);
        assert_eq!(h.name(), "late-interaction-heldout");
        let mut bad = LateParams::at_scale(Scale::Default, false);
        bad.colbert_dims = vec![128];
        assert!(bad.check().unwrap_err().to_string().contains("held_out"));
        let mut bad = LateParams::at_scale(Scale::Quick, false);
        bad.lambdas.clear();
        assert!(bad.check().unwrap_err().to_string().contains("lambdas"));
        let mut bad = LateParams::at_scale(Scale::Quick, false);
        bad.lambdas = vec![0.0];
        assert!(bad.check().unwrap_err().to_string().contains("λ = 0"));
    }

    #[test]
    fn legend_labels_keep_lambda() {
        assert_eq!(
            short_label("MaxSim end-to-end (k = 100, λ = 2, k̂ = 50)"),
            "MaxSim end-to-end (λ = 2)"
        );
        assert_eq!(short_label("TF-IDF (cosine)"), "TF-IDF (cosine)");
    }

    /// The whole study at a tiny size (8 questions, no approximate row): every system
    /// has a run per question, the re-ranker keeps TF-IDF's candidates, the metrics are
    /// in range, the token-relevance views are drawn and the outputs are written.
    #[test]
    fn tiny_study_runs_scores_and_writes() {
        let env = Env::project().unwrap();
        let mut p = LateParams::at_scale(Scale::Quick, false);
        p.questions = 8;
        p.approx_nlist = 0;
        p.trials = 100;
        p.candidate_sample = 4;
        let study = run(&env, &p.check().unwrap()).unwrap();
        assert_eq!(study.passages, 646);
        assert_eq!(study.questions.len(), 8);
        let labels: Vec<&str> = study.systems.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(labels.len(), 3, "{labels:?}");
        assert_eq!(study.first_e2e, 2);
        for s in &study.systems {
            assert_eq!(s.run.len(), 8, "{}", s.label);
        }
        // Re-ranking permutes TF-IDF's top 100: the same passages per question.
        for (id, ..) in &study.questions {
            let mut a: Vec<&str> = study.systems[0].run[id]
                .iter()
                .map(|h| h.id.as_str())
                .collect();
            let mut b: Vec<&str> = study.systems[1].run[id]
                .iter()
                .map(|h| h.id.as_str())
                .collect();
            a.sort_unstable();
            b.sort_unstable();
            assert_eq!(a, b, "{id}");
        }
        for r in study.results.iter().flatten() {
            assert!((0.0..=1.0).contains(&r.mean), "{}: {}", r.name, r.mean);
        }
        assert!(!study.views.is_empty());
        let tmp = tempfile::tempdir().unwrap();
        let out = ResultDir::at(tmp.path().join("r"), "r", &serde_json::json!({})).unwrap();
        out.begin().unwrap();
        study.write(&out).unwrap();
        let t = Table::read_csv(&out.path("metrics.csv")).unwrap();
        assert_eq!(t.rows.len(), 3);
        assert!(out.path("token_relevance_1.html").is_file());
    }
}
