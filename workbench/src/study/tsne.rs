//! Report 000, Figure 2: t-SNE of paragraph embeddings, coloured by topic.
//!
//! Paragraphs of the Wikipedia lead sections (`wiki-leads-en`, report 000's length filter:
//! 21–199 words), a seeded sample stratified over the corpus' 12 `topic` labels (equal
//! allocation), embedded with all-MiniLM-L6-v2 (384-d, mean pooling, normalised) and
//! projected with linfa-tsne.
//!
//! The report's caption claims topical clustering; the study checks it with numbers
//! ([`crate::analysis::clustering`]): the k-NN topic agreement in the 2-D map and in the
//! 384-d space (cosine) against chance and a label-permutation test, and the silhouette
//! of the topic labels. The study is the same at every scale (500 points embed and project
//! in well under a minute).

use super::{Env, Scale};
use crate::analysis::clustering::{agreement, chance_agreement, knn, silhouette};
use crate::analysis::{tsne_2d, TsneParams};
use crate::chunk::{Chunker, ParagraphParams};
use crate::display::Table;
use crate::encode::{dot, BertEncoder, CacheStatus, EmbeddingCache, EncoderParams};
use crate::load::wikipedia_corpus;
use crate::results::ResultDir;
use crate::{Error, Passage, Result};
use rand::seq::index::sample;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Instant;

/// The study's result folder (one for every scale).
pub const NAME: &str = "fig2-tsne";
/// How the sample is drawn (recorded in `config.json`).
pub const SAMPLING: &str = "paragraphs grouped by their article's topic; topics in name order; equal allocation (points / topics, the first points % topics topics get one more); rand::seq::index::sample with ChaCha8Rng::seed_from_u64(sample_seed), drawn topic by topic";

/// The study's parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TsneStudyParams {
    /// The corpus asset (its documents carry a `topic` label).
    pub corpus: String,
    /// Paragraphs to embed and project.
    pub points: usize,
    /// Seed of the stratified sample and of the permutation test.
    pub sample_seed: u64,
    /// Sentence encoder (asset name).
    pub model: String,
    /// t-SNE perplexity.
    pub perplexity: f64,
    /// Barnes-Hut threshold θ (0 = exact). Exact by default: linfa-tsne 0.8's Barnes-Hut
    /// path builds its vantage-point tree with `rand::thread_rng`, so with θ > 0 the map
    /// changes from run to run whatever the seed.
    pub theta: f64,
    /// t-SNE iterations.
    pub max_iter: usize,
    /// Seed of the t-SNE initial embedding.
    pub tsne_seed: u64,
    /// Neighbours for the k-NN topic agreement.
    pub knn: usize,
    /// Label permutations for the agreement's p-value.
    pub permutations: usize,
}

impl Default for TsneStudyParams {
    fn default() -> Self {
        TsneStudyParams {
            corpus: "wiki-leads-en".into(),
            points: 500,
            sample_seed: 42,
            model: "all-minilm-l6-v2".into(),
            perplexity: 30.0,
            theta: 0.0,
            max_iter: 1000,
            tsne_seed: 42,
            knn: 10,
            permutations: 1000,
        }
    }
}

impl TsneStudyParams {
    /// The t-SNE parameters.
    pub fn tsne(&self) -> TsneParams {
        TsneParams {
            perplexity: self.perplexity,
            theta: self.theta,
            max_iter: self.max_iter,
            seed: self.tsne_seed,
        }
    }

    /// Check the values: more points than neighbours, at least one neighbour,
    /// permutation and iteration, a positive perplexity and θ in [0, 1].
    pub fn check(self) -> Result<TsneValid> {
        if self.knn == 0 || self.points <= self.knn {
            return Err(Error::param(
                "knn",
                format!(
                    "{} neighbours need at least {} points (points = {})",
                    self.knn,
                    self.knn + 1,
                    self.points
                ),
            ));
        }
        if self.permutations == 0 {
            return Err(Error::param("permutations", "at least one permutation"));
        }
        if self.max_iter == 0 {
            return Err(Error::param("max_iter", "at least one iteration"));
        }
        if self.perplexity.is_nan() || self.perplexity <= 0.0 {
            return Err(Error::param(
                "perplexity",
                format!("{} is not positive", self.perplexity),
            ));
        }
        if !(0.0..=1.0).contains(&self.theta) {
            return Err(Error::param(
                "theta",
                format!("{} is not in [0, 1]", self.theta),
            ));
        }
        Ok(TsneValid(self))
    }
}

crate::env::checked_params!(TsneValid, TsneStudyParams, "Checked [`TsneStudyParams`].");

impl TsneValid {
    /// What `config.json` records: the parameters, the filter, the encoder's and the
    /// t-SNE parameters, the sampling rule, the sha256 of the corpus' and encoder's files
    /// and the program's sha256.
    pub fn resolved(&self, env: &Env) -> Result<super::Resolved<'_, TsneStudyParams>> {
        super::Resolved::new(
            env,
            &self.0,
            [self.corpus.as_str(), self.model.as_str()],
            serde_json::json!({
                "filter": ParagraphParams::default(),
                "encoder": EncoderParams::default(),
                "tsne": self.tsne(),
                "sampling": SAMPLING,
            }),
        )
    }
}

/// A clustering measure: in the 2-D map and in the embedding space.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InBothSpaces {
    /// In the t-SNE map (euclidean).
    pub map: f64,
    /// In the 384-d space (cosine distance).
    pub embedding: f64,
}

/// What the study found.
#[derive(Debug, Clone)]
pub struct TsneStudy {
    /// The parameters it ran with.
    pub params: TsneStudyParams,
    /// Articles in the corpus and paragraphs kept by the filter.
    pub corpus_size: (usize, usize),
    /// The sampled paragraphs.
    pub sample: Vec<Passage>,
    /// Topic names, in name order.
    pub topics: Vec<String>,
    /// Each sampled paragraph's topic (index into `topics`).
    pub labels: Vec<usize>,
    /// The 2-D map.
    pub xy: Vec<(f64, f64)>,
    /// Mean k-NN topic agreement.
    pub agreement: InBothSpaces,
    /// Per topic.
    pub agreement_per_topic: Vec<InBothSpaces>,
    /// The agreement of a random neighbour.
    pub chance: f64,
    /// Permutation p-values of the agreement.
    pub p: InBothSpaces,
    /// Mean and maximum agreement in the map under the permutations.
    pub permuted_map: (f64, f64),
    /// Mean silhouette of the topic labels.
    pub silhouette: InBothSpaces,
    /// Per topic.
    pub silhouette_per_topic: Vec<InBothSpaces>,
    /// Seconds to embed (or read from the cache), the cache status, seconds of t-SNE.
    pub seconds: (f64, CacheStatus, f64),
}

impl super::Study for TsneValid {
    type Output = TsneStudy;

    fn name(&self) -> String {
        NAME.to_string()
    }

    fn scale(&self) -> Scale {
        Scale::Default
    }

    fn summary_file(&self) -> &'static str {
        "clustering.md"
    }

    fn resolved(&self, env: &Env) -> Result<impl serde::Serialize + '_> {
        TsneValid::resolved(self, env)
    }

    fn run(&self, env: &Env) -> Result<TsneStudy> {
        run(env, self)
    }
}

/// Sample the paragraphs, embed, project and measure the clustering.
pub fn run(env: &Env, params: &TsneValid) -> Result<TsneStudy> {
    let p = &params.0;
    let docs = wikipedia_corpus(&env.assets, &p.corpus)?;
    let topic_of: HashMap<&str, &str> = docs
        .iter()
        .map(|d| {
            (
                d.id.as_str(),
                d.meta.get("topic").map(String::as_str).unwrap_or(""),
            )
        })
        .collect();
    let passages = ParagraphParams::default().check()?.chunk_all(&docs)?;
    let mut by_topic: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, ps) in passages.iter().enumerate() {
        let t = topic_of.get(ps.doc_id.as_str()).copied().unwrap_or("");
        if t.is_empty() {
            return Err(Error::param(
                "corpus",
                format!(
                    "article `{}` of `{}` has no topic label",
                    ps.doc_id, p.corpus
                ),
            ));
        }
        by_topic.entry(t).or_default().push(i);
    }
    let topics: Vec<&str> = by_topic.keys().copied().collect();
    let nt = topics.len();
    if p.points < nt {
        return Err(Error::param(
            "points",
            format!("{} is fewer than the {nt} topics", p.points),
        ));
    }
    let mut rng = ChaCha8Rng::seed_from_u64(p.sample_seed);
    let mut chosen: Vec<(usize, usize)> = Vec::new(); // (passage index, topic index)
    for (ti, t) in topics.iter().enumerate() {
        let pool = &by_topic[t];
        let quota = p.points / nt + usize::from(ti < p.points % nt);
        if quota > pool.len() {
            return Err(Error::param(
                "points",
                format!(
                    "topic `{t}` has {} paragraphs, fewer than its quota {quota}",
                    pool.len()
                ),
            ));
        }
        let mut idx: Vec<usize> = sample(&mut rng, pool.len(), quota)
            .into_iter()
            .map(|k| pool[k])
            .collect();
        idx.sort_unstable();
        chosen.extend(idx.into_iter().map(|i| (i, ti)));
    }
    let sample_passages: Vec<Passage> = chosen.iter().map(|&(i, _)| passages[i].clone()).collect();
    let labels: Vec<usize> = chosen.iter().map(|&(_, t)| t).collect();
    let n = sample_passages.len();

    let encoder = Arc::new(BertEncoder::load(
        &env.assets,
        &p.model,
        EncoderParams::default(),
    )?);
    let t0 = Instant::now();
    let (vectors, status) = EmbeddingCache::new(env.cache_dir("embeddings"))
        .get_or_compute_with_status(&encoder, &sample_passages)?;
    let embed_s = t0.elapsed().as_secs_f64();
    let t0 = Instant::now();
    let xy = tsne_2d(&vectors, &p.tsne())?;
    let tsne_s = t0.elapsed().as_secs_f64();

    let cos_d = |i: usize, j: usize| 1.0 - dot(&vectors[i], &vectors[j]) as f64;
    let euc_d =
        |i: usize, j: usize| ((xy[i].0 - xy[j].0).powi(2) + (xy[i].1 - xy[j].1).powi(2)).sqrt();
    let nb2 = knn(n, p.knn, euc_d);
    let nb384 = knn(n, p.knn, cos_d);
    let (agree2, agree2_t) = agreement(&nb2, &labels, nt);
    let (agree384, agree384_t) = agreement(&nb384, &labels, nt);
    let chance = chance_agreement(&labels, nt);
    // Permutation test: shuffle the labels over the fixed neighbour graphs.
    let mut perm_rng = ChaCha8Rng::seed_from_u64(p.sample_seed);
    let mut shuffled = labels.clone();
    let (mut ge2, mut ge384, mut perm_sum, mut perm_max) = (0usize, 0usize, 0.0, 0.0f64);
    for _ in 0..p.permutations {
        shuffled.shuffle(&mut perm_rng);
        let a2 = agreement(&nb2, &shuffled, nt).0;
        let a384 = agreement(&nb384, &shuffled, nt).0;
        ge2 += usize::from(a2 >= agree2);
        ge384 += usize::from(a384 >= agree384);
        perm_sum += a2;
        perm_max = perm_max.max(a2);
    }
    let pv = |ge: usize| (ge + 1) as f64 / (p.permutations + 1) as f64;
    let (sil384, sil384_t) = silhouette(n, &labels, nt, cos_d);
    let (sil2, sil2_t) = silhouette(n, &labels, nt, euc_d);
    let both = |a: &[f64], b: &[f64]| -> Vec<InBothSpaces> {
        a.iter()
            .zip(b)
            .map(|(&map, &embedding)| InBothSpaces { map, embedding })
            .collect()
    };
    Ok(TsneStudy {
        params: p.clone(),
        corpus_size: (docs.len(), passages.len()),
        sample: sample_passages,
        topics: topics.iter().map(|t| t.to_string()).collect(),
        labels,
        xy,
        agreement: InBothSpaces {
            map: agree2,
            embedding: agree384,
        },
        agreement_per_topic: both(&agree2_t, &agree384_t),
        chance,
        p: InBothSpaces {
            map: pv(ge2),
            embedding: pv(ge384),
        },
        permuted_map: (perm_sum / p.permutations as f64, perm_max),
        silhouette: InBothSpaces {
            map: sil2,
            embedding: sil384,
        },
        silhouette_per_topic: both(&sil2_t, &sil384_t),
        seconds: (embed_s, status, tsne_s),
    })
}

impl TsneStudy {
    /// The clustering measures against chance.
    pub fn clustering(&self) -> Result<Table> {
        let k = self.params.knn;
        let mut t = Table::new([
            "measure",
            "space",
            "value",
            "chance",
            "ratio_to_chance",
            "p_permutation",
        ])
        .caption(format!(
            "Topical clustering of {} {} paragraphs ({} topics): k-NN topic agreement (k = {k}) \
             and silhouette of the topic labels. Chance = agreement of a random neighbour; p from {} label permutations.",
            self.sample.len(),
            self.params.corpus,
            self.topics.len(),
            self.params.permutations
        ));
        let c = self.chance;
        for (space, a, pv) in [
            ("t-SNE 2-D (euclidean)", self.agreement.map, self.p.map),
            (
                "MiniLM 384-d (cosine)",
                self.agreement.embedding,
                self.p.embedding,
            ),
        ] {
            t.push([
                format!("knn{k}_topic_agreement"),
                space.into(),
                format!("{a:.3}"),
                format!("{c:.3}"),
                format!("{:.2}", a / c),
                format!("{pv:.4}"),
            ])?;
        }
        for (space, s) in [
            ("MiniLM 384-d (cosine distance)", self.silhouette.embedding),
            ("t-SNE 2-D (euclidean)", self.silhouette.map),
        ] {
            t.push([
                "silhouette_by_topic".into(),
                space.into(),
                format!("{s:.3}"),
                "0".into(),
                "–".into(),
                "–".into(),
            ])?;
        }
        Ok(t)
    }

    /// Agreement and silhouette per topic.
    pub fn per_topic(&self) -> Result<Table> {
        let mut t = Table::new([
            "topic",
            "points",
            "knn_agreement_2d",
            "knn_agreement_384d",
            "silhouette_2d",
            "silhouette_384d",
        ]);
        for (c, name) in self.topics.iter().enumerate() {
            let size = self.labels.iter().filter(|&&l| l == c).count();
            let (a, s) = (self.agreement_per_topic[c], self.silhouette_per_topic[c]);
            t.push([
                name.clone(),
                size.to_string(),
                format!("{:.3}", a.map),
                format!("{:.3}", a.embedding),
                format!("{:.3}", s.map),
                format!("{:.3}", s.embedding),
            ])?;
        }
        Ok(t)
    }

    /// Every point: id, title, topic, map coordinates.
    pub fn points(&self) -> Result<Table> {
        let mut t = Table::new(["id", "title", "topic", "x", "y"]);
        for (i, p) in self.sample.iter().enumerate() {
            t.push([
                p.id.clone(),
                p.title.clone(),
                self.topics[self.labels[i]].clone(),
                format!("{:.4}", self.xy[i].0),
                format!("{:.4}", self.xy[i].1),
            ])?;
        }
        Ok(t)
    }

    /// Figure 2: the map, coloured by topic, its agreement in the title.
    #[cfg(feature = "plot")]
    pub fn figure(&self) -> crate::plot::Scatter {
        crate::plot::Scatter {
            title: format!(
                "Figure 2: t-SNE of {} paragraph embeddings by topic ({}-NN topic agreement {:.2}, chance {:.2})",
                self.sample.len(),
                self.params.knn,
                self.agreement.map,
                self.chance
            ),
            x_label: "t-SNE 1".into(),
            y_label: "t-SNE 2".into(),
            points: self
                .xy
                .iter()
                .zip(&self.labels)
                .map(|(&(x, y), &c)| (x, y, c))
                .collect(),
            categories: self.topics.clone(),
            size: (1400, 860),
        }
    }

    /// The clustering table's caption, the table and the per-topic table as Markdown.
    pub fn markdown(&self) -> Result<String> {
        let c = self.clustering()?;
        Ok(format!(
            "{}\n{}\n",
            c.to_markdown(),
            self.per_topic()?.to_markdown()
        ))
    }

    /// The numbers `manifest.json` records.
    pub fn summary(&self) -> serde_json::Value {
        serde_json::json!({
            "points": self.sample.len(),
            "topics": self.topics.len(),
            "paragraphs_in_corpus": self.corpus_size.1,
            "knn_k": self.params.knn,
            "knn_agreement_2d": self.agreement.map,
            "knn_agreement_384d": self.agreement.embedding,
            "chance_agreement": self.chance,
            "permutation_mean_2d": self.permuted_map.0,
            "permutation_max_2d": self.permuted_map.1,
            "p_permutation_2d": self.p.map,
            "p_permutation_384d": self.p.embedding,
            "silhouette_384d_cosine": self.silhouette.embedding,
            "silhouette_2d": self.silhouette.map,
            "embed_seconds": self.seconds.0,
            "embedding_cache": format!("{:?}", self.seconds.1),
            "tsne_seconds": self.seconds.2,
        })
    }

    /// `points.csv`, `clustering.csv`/`.md`, `per_topic.csv` and (feature `plot`)
    /// `fig2.png`/`.svg`.
    pub fn write(&self, out: &ResultDir) -> Result<()> {
        self.points()?.write_csv(&out.path("points.csv"))?;
        self.clustering()?.write_csv(&out.path("clustering.csv"))?;
        self.per_topic()?.write_csv(&out.path("per_topic.csv"))?;
        let md = out.path("clustering.md");
        std::fs::write(&md, self.markdown()?).map_err(|e| Error::io(&md, e))?;
        #[cfg(feature = "plot")]
        crate::plot::render(&self.figure())?.save(out.out_dir(), "fig2")?;
        Ok(())
    }
}

impl super::Outputs for TsneStudy {
    fn write(&self, out: &ResultDir) -> Result<()> {
        TsneStudy::write(self, out)
    }
    fn markdown(&self) -> Result<String> {
        TsneStudy::markdown(self)
    }
    fn summary(&self) -> Result<serde_json::Value> {
        Ok(TsneStudy::summary(self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_check_and_bad_values_are_named() {
        TsneStudyParams::default().check().unwrap();
        let bad = TsneStudyParams {
            knn: 500,
            ..TsneStudyParams::default()
        };
        assert!(bad.check().unwrap_err().to_string().contains("knn"));
        let bad = TsneStudyParams {
            theta: 2.0,
            ..TsneStudyParams::default()
        };
        assert!(bad.check().unwrap_err().to_string().contains("theta"));
        let bad = TsneStudyParams {
            perplexity: 0.0,
            ..TsneStudyParams::default()
        };
        assert!(bad.check().unwrap_err().to_string().contains("perplexity"));
    }

    /// The whole study at a tiny size (24 points, 2 per topic, 100 iterations): the
    /// sample is stratified, the map has a point per paragraph, the measures are in range
    /// and the outputs are written.
    #[test]
    fn tiny_study_runs_and_writes() {
        let env = Env::project().unwrap();
        let p = TsneStudyParams {
            points: 24,
            perplexity: 5.0,
            max_iter: 100,
            knn: 3,
            permutations: 50,
            ..TsneStudyParams::default()
        };
        let study = run(&env, &p.check().unwrap()).unwrap();
        assert_eq!(study.topics.len(), 12);
        assert_eq!((study.sample.len(), study.xy.len()), (24, 24));
        for c in 0..12 {
            assert_eq!(study.labels.iter().filter(|&&l| l == c).count(), 2);
        }
        for a in [study.agreement.map, study.agreement.embedding] {
            assert!((0.0..=1.0).contains(&a), "{a}");
        }
        // 12 topics of 2: a random neighbour shares the topic with chance 12·2 / (24·23).
        assert!((study.chance - 24.0 / 552.0).abs() < 1e-12);
        assert!(study.p.map > 0.0 && study.p.map <= 1.0);
        let tmp = tempfile::tempdir().unwrap();
        let out = ResultDir::at(tmp.path().join("r"), "r", &serde_json::json!({})).unwrap();
        out.begin().unwrap();
        study.write(&out).unwrap();
        let points = Table::read_csv(&out.path("points.csv")).unwrap();
        assert_eq!(points.rows.len(), 24);
    }
}
