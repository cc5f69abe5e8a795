//! Report 000, Figure 1: paragraph lengths of the Wikipedia corpora before and after its
//! length filter (paragraphs of 21–199 words kept), with the counts behind it. The study is
//! the same at every scale (counting takes seconds).

use super::{Env, Scale};
use crate::chunk::ParagraphParams;
use crate::display::Table;
use crate::load::{wikipedia_corpus, WIKIPEDIA_CORPORA};
use crate::plot::{Bins, HistogramGrid, ParagraphLengths};
use crate::results::ResultDir;
use crate::{Error, Result};
use serde::{Deserialize, Serialize};

/// The study's result folder (one for every scale).
pub const NAME: &str = "fig1-paragraph-lengths";

/// The study's parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LengthsParams {
    /// Wikipedia corpus assets, one panel each.
    pub corpora: Vec<String>,
    /// Smallest kept paragraph, in words (report 000: dropped ≤ 20).
    pub min_words: usize,
    /// Largest kept paragraph, in words (report 000: dropped ≥ 200).
    pub max_words: usize,
    /// Histogram bin width, in words.
    pub bin_width: f64,
    /// Paragraphs at least this long share one overflow bin.
    pub overflow_at: f64,
}

impl Default for LengthsParams {
    fn default() -> Self {
        LengthsParams {
            corpora: vec![
                WIKIPEDIA_CORPORA[0].to_string(),
                WIKIPEDIA_CORPORA[2].to_string(),
                WIKIPEDIA_CORPORA[1].to_string(),
            ],
            min_words: 21,
            max_words: 199,
            bin_width: 10.0,
            overflow_at: 400.0,
        }
    }
}

impl LengthsParams {
    /// The paragraph filter.
    pub fn filter(&self) -> ParagraphParams {
        ParagraphParams::default()
            .min_words(self.min_words)
            .max_words(self.max_words)
    }

    /// Check the values: a corpus, a valid filter and valid bins.
    pub fn check(self) -> Result<LengthsValid> {
        if self.corpora.is_empty() {
            return Err(Error::param("corpora", "no corpus"));
        }
        self.filter().check()?;
        let bins = Bins::new(0.0, self.overflow_at, self.bin_width, true)?;
        Ok(LengthsValid { params: self, bins })
    }
}

/// Checked [`LengthsParams`] with their bins.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LengthsValid {
    /// The parameters.
    pub params: LengthsParams,
    /// The histogram bins.
    pub bins: Bins,
}

impl LengthsValid {
    /// What `config.json` records: the parameters, the filter, the bins, the sha256 of
    /// each corpus file and the program's sha256.
    pub fn resolved(&self, env: &Env) -> Result<super::Resolved<'_, LengthsParams>> {
        super::Resolved::new(
            env,
            &self.params,
            self.params.corpora.iter().map(String::as_str),
            serde_json::json!({ "filter": self.params.filter(), "bins": self.bins }),
        )
    }
}

/// What the study counted.
#[derive(Debug, Clone)]
pub struct LengthsStudy {
    /// The parameters and bins.
    pub params: LengthsValid,
    /// Per corpus, in order: lengths and what the filter kept.
    pub corpora: Vec<ParagraphLengths>,
}

impl super::Study for LengthsValid {
    type Output = LengthsStudy;

    fn name(&self) -> String {
        NAME.to_string()
    }

    fn scale(&self) -> Scale {
        Scale::Default
    }

    fn summary_file(&self) -> &'static str {
        "counts.md"
    }

    fn resolved(&self, env: &Env) -> Result<impl serde::Serialize + '_> {
        LengthsValid::resolved(self, env)
    }

    fn run(&self, env: &Env) -> Result<LengthsStudy> {
        run(env, self)
    }
}

/// Count every corpus' paragraph lengths and what the filter keeps.
pub fn run(env: &Env, params: &LengthsValid) -> Result<LengthsStudy> {
    let chunker = params.params.filter().check()?;
    let corpora = params
        .params
        .corpora
        .iter()
        .map(|name| {
            let docs = wikipedia_corpus(&env.assets, name)?;
            ParagraphLengths::compute(name, &docs, &chunker)
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(LengthsStudy {
        params: params.clone(),
        corpora,
    })
}

impl LengthsStudy {
    /// Paragraphs per corpus: all, kept, too short, too long.
    pub fn table(&self) -> Result<Table> {
        let p = &self.params.params;
        let mut t = Table::new([
            "corpus",
            "articles",
            "paragraphs",
            "kept",
            "too_short",
            "too_long",
            "kept_%",
            "mean_words_kept",
        ])
        .caption(format!(
            "Paragraph length filter (keep {}–{} words). Report 000: 525,665 → 184,051 paragraphs (35.0%) over 5,000 articles.",
            p.min_words, p.max_words
        ));
        for m in &self.corpora {
            let s = m.stats;
            t.push([
                m.corpus.clone(),
                m.articles.to_string(),
                s.total.to_string(),
                s.kept.to_string(),
                s.too_short.to_string(),
                s.too_long.to_string(),
                format!("{:.1}", m.kept_percent()),
                format!("{:.1}", m.mean_kept()),
            ])?;
        }
        Ok(t)
    }

    /// Every bin's count before and after the filter, per corpus.
    pub fn bins_table(&self) -> Result<Table> {
        let bins = &self.params.bins;
        let mut t = Table::new(["corpus", "bin", "lo", "hi", "all", "kept"]);
        for m in &self.corpora {
            let (all, kept) = m.counts(bins);
            for i in 0..bins.len() {
                let (lo, hi) = bins.edges(i);
                t.push([
                    m.corpus.clone(),
                    bins.label(i),
                    lo.to_string(),
                    hi.to_string(),
                    all[i].to_string(),
                    kept[i].to_string(),
                ])?;
            }
        }
        Ok(t)
    }

    /// Figure 1: one histogram per corpus, before and after the filter.
    pub fn figure(&self) -> HistogramGrid {
        HistogramGrid {
            caption: "Figure 1 (report 000): paragraph lengths before and after the length filter"
                .into(),
            panels: self
                .corpora
                .iter()
                .map(|m| m.histogram(self.params.bins))
                .collect(),
            cols: 1,
            panel_size: (1000, 380),
        }
    }

    /// The counts table as Markdown (the caption printed above it).
    pub fn markdown(&self) -> Result<String> {
        let t = self.table()?;
        Ok(t.to_markdown())
    }

    /// Per corpus, the filter's counts (`manifest.json`).
    pub fn summary(&self) -> Result<serde_json::Value> {
        let mut s = serde_json::Map::new();
        for m in &self.corpora {
            s.insert(m.corpus.clone(), serde_json::to_value(m.stats)?);
        }
        Ok(serde_json::Value::Object(s))
    }

    /// `fig1.png`/`.svg`, `counts.csv`/`.md`, `bins.csv`.
    pub fn write(&self, out: &ResultDir) -> Result<()> {
        crate::plot::render(&self.figure())?.save(out.out_dir(), "fig1")?;
        let t = self.table()?;
        t.write_csv(&out.path("counts.csv"))?;
        let md = out.path("counts.md");
        std::fs::write(&md, t.to_markdown()).map_err(|e| Error::io(&md, e))?;
        self.bins_table()?.write_csv(&out.path("bins.csv"))?;
        Ok(())
    }
}

impl super::Outputs for LengthsStudy {
    fn write(&self, out: &ResultDir) -> Result<()> {
        LengthsStudy::write(self, out)
    }
    fn markdown(&self) -> Result<String> {
        LengthsStudy::markdown(self)
    }
    fn summary(&self) -> Result<serde_json::Value> {
        LengthsStudy::summary(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_check_and_bad_values_are_named() {
        let v = LengthsParams::default().check().unwrap();
        assert_eq!(v.params.corpora.len(), 3);
        let bad = LengthsParams {
            corpora: vec![],
            ..LengthsParams::default()
        };
        assert!(bad.check().unwrap_err().to_string().contains("corpora"));
        let bad = LengthsParams {
            bin_width: 0.0,
            ..LengthsParams::default()
        };
        assert!(bad.check().is_err());
    }
}
