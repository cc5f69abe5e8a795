//! Token relevance (report 003 §5): `R_abs`, `R_acc` and a Gaussian kernel density over
//! the passage positions each query token credits, rendered as highlighted HTML.

use super::maxsim::{dot, maxsim, whole_rows};
use crate::{Error, Result};
use serde::{Deserialize, Serialize};

/// Which token-relevance measure to show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RelevanceKind {
    /// `R_abs`: how many query tokens chose the passage token.
    Absolute,
    /// `R_acc`: the summed similarity of the query tokens that chose it.
    Accumulated,
    /// Gaussian kernel density over the positions of the chosen tokens.
    Density,
}

impl RelevanceKind {
    fn title(self) -> &'static str {
        match self {
            RelevanceKind::Absolute => "Absolute count R_abs",
            RelevanceKind::Accumulated => "Accumulated similarity R_acc",
            RelevanceKind::Density => "Kernel density estimate",
        }
    }
    fn rgb(self) -> (u8, u8, u8) {
        match self {
            RelevanceKind::Absolute => (31, 119, 180),
            RelevanceKind::Accumulated => (255, 127, 14),
            RelevanceKind::Density => (44, 160, 44),
        }
    }
}

/// Parameters of [`TokenRelevance`].
#[derive(Debug, Clone, PartialEq)]
pub struct RelevanceParams {
    /// `k̃`: how many best passage tokens each query token credits. Default 2, report 003
    /// §5.1 ("We identified the k̃ = 2 most similar passage vectors for each query
    /// vector"). With `k̃ = 1` a token is credited exactly when it is a query token's
    /// MaxSim argmax, so `Σ R_abs = |q|` and `Σ R_acc` = the MaxSim numerator `Σ_i max_j`.
    pub k_tilde: usize,
    /// KDE bandwidth in token positions. `None` (default): Scott's rule, `σ̂ · n^(-1/5)`
    /// with `σ̂` the sample standard deviation (ddof 1) of the `n = k̃·|q|` chosen
    /// positions — `scipy.stats.gaussian_kde`'s default; 1 token when `n < 2` or `σ̂ = 0`.
    /// The report names no bandwidth.
    pub bandwidth: Option<f32>,
}

impl Default for RelevanceParams {
    fn default() -> Self {
        RelevanceParams {
            k_tilde: 2,
            bandwidth: None,
        }
    }
}

/// Per-token relevance of a passage for a query (report 003 §5), with the text to render it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenRelevance {
    /// The query.
    pub query: String,
    /// The query's wordpieces (one per query vector).
    pub query_tokens: Vec<String>,
    /// The passage text the offsets point into.
    pub text: String,
    /// Passage wordpieces (no `[CLS]`/`[SEP]`; report 003's KDE ignores them too).
    pub tokens: Vec<String>,
    /// Byte span of each passage token in `text`.
    pub offsets: Vec<(usize, usize)>,
    /// `R_abs(q, d_l) = |Q(q, d_l)|`: number of query tokens that have `d_l` among their
    /// `k̃` most similar passage tokens.
    pub r_abs: Vec<u32>,
    /// `R_acc(q, d_l) = Σ_{E_qi ∈ Q(q, d_l)} sim(E_qi, E_dl)`.
    pub r_acc: Vec<f32>,
    /// Gaussian KDE of the `k̃·|q|` chosen positions, evaluated at each token position
    /// `0..|d|` (a density over positions: non-negative, integrates to 1 over ℝ).
    pub density: Vec<f32>,
    /// The KDE bandwidth used, in token positions.
    pub bandwidth: f32,
    /// The `k̃` used.
    pub k_tilde: usize,
    /// Mean-MaxSim score of the pair.
    pub score: f32,
}

/// The numbers behind [`TokenRelevance`], from vectors alone.
#[derive(Debug, Clone, PartialEq)]
pub struct RelevanceScores {
    /// See [`TokenRelevance::r_abs`].
    pub r_abs: Vec<u32>,
    /// See [`TokenRelevance::r_acc`].
    pub r_acc: Vec<f32>,
    /// See [`TokenRelevance::density`].
    pub density: Vec<f32>,
    /// The bandwidth used.
    pub bandwidth: f32,
    /// The chosen positions (KDE sample), `k̃` per query token, best first.
    pub chosen: Vec<usize>,
    /// Mean-MaxSim of the pair.
    pub score: f32,
}

/// Gaussian kernel density of `samples` evaluated at `at`; returns the densities and the
/// bandwidth (`None` → Scott's rule, see [`RelevanceParams::bandwidth`]).
pub fn gaussian_kde(samples: &[f32], at: &[f32], bandwidth: Option<f32>) -> (Vec<f32>, f32) {
    let n = samples.len();
    let h = match bandwidth {
        Some(h) => h,
        None => {
            if n < 2 {
                1.0
            } else {
                let mean = samples.iter().map(|&x| x as f64).sum::<f64>() / n as f64;
                let var = samples
                    .iter()
                    .map(|&x| (x as f64 - mean).powi(2))
                    .sum::<f64>()
                    / (n - 1) as f64;
                let h = var.sqrt() * (n as f64).powf(-0.2);
                if h > 0.0 {
                    h as f32
                } else {
                    1.0
                }
            }
        }
    };
    if n == 0 {
        return (vec![0.0; at.len()], h);
    }
    let norm = 1.0 / (n as f64 * h as f64 * (2.0 * std::f64::consts::PI).sqrt());
    let dens = at
        .iter()
        .map(|&x| {
            let s: f64 = samples
                .iter()
                .map(|&xi| {
                    let z = (x as f64 - xi as f64) / h as f64;
                    (-0.5 * z * z).exp()
                })
                .sum();
            (s * norm) as f32
        })
        .collect();
    (dens, h)
}

/// `R_abs`, `R_acc` and the KDE for query vectors `q` against passage vectors `d`
/// (row-major, normalised rows). Each query token credits its `k̃` most similar passage
/// tokens (ties: lower position first).
pub fn relevance_scores(
    q: &[f32],
    d: &[f32],
    dim: usize,
    params: &RelevanceParams,
) -> Result<RelevanceScores> {
    if params.k_tilde == 0 {
        return Err(Error::param("k_tilde", "must be at least 1"));
    }
    if let Some(h) = params.bandwidth {
        if !(h.is_finite() && h > 0.0) {
            return Err(Error::param(
                "bandwidth",
                format!("{h} is not a positive number"),
            ));
        }
    }
    if dim == 0 || !whole_rows(q.len(), dim) || !whole_rows(d.len(), dim) {
        return Err(Error::param(
            "dim",
            format!(
                "{dim} does not divide the matrix sizes {} and {}",
                q.len(),
                d.len()
            ),
        ));
    }
    let nd = d.len() / dim;
    let mut r_abs = vec![0u32; nd];
    let mut r_acc = vec![0f32; nd];
    let mut chosen = Vec::new();
    let mut sims: Vec<(usize, f32)> = Vec::with_capacity(nd);
    for qrow in q.chunks_exact(dim) {
        sims.clear();
        sims.extend(d.chunks_exact(dim).map(|drow| dot(qrow, drow)).enumerate());
        sims.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        for &(j, s) in sims.iter().take(params.k_tilde) {
            r_abs[j] += 1;
            r_acc[j] += s;
            chosen.push(j);
        }
    }
    let samples: Vec<f32> = chosen.iter().map(|&j| j as f32).collect();
    let positions: Vec<f32> = (0..nd).map(|j| j as f32).collect();
    let (density, bandwidth) = gaussian_kde(&samples, &positions, params.bandwidth);
    Ok(RelevanceScores {
        r_abs,
        r_acc,
        density,
        bandwidth,
        chosen,
        score: maxsim(q, d, dim),
    })
}

fn escape_html(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

impl TokenRelevance {
    /// Values of one measure, one per passage token.
    pub fn values(&self, which: RelevanceKind) -> Vec<f32> {
        match which {
            RelevanceKind::Absolute => self.r_abs.iter().map(|&v| v as f32).collect(),
            RelevanceKind::Accumulated => self.r_acc.clone(),
            RelevanceKind::Density => self.density.clone(),
        }
    }

    /// Index of the passage token with the highest value of a measure (first on ties).
    pub fn argmax(&self, which: RelevanceKind) -> Option<usize> {
        let v = self.values(which);
        (0..v.len()).reduce(|a, b| if v[b] > v[a] { b } else { a })
    }

    /// The passage text as HTML with every token's background opacity proportional to the
    /// chosen measure (0 → transparent, the passage maximum → opaque; negative values show
    /// as 0), a hover title with all three measures, and a legend. All text is escaped.
    pub fn to_html(&self, which: RelevanceKind) -> String {
        let values = self.values(which);
        let max = values.iter().cloned().fold(0f32, f32::max);
        let (r, g, b) = which.rgb();
        let mut s = String::from(
            "<div class=\"wb-token-relevance\" style=\"font-family:sans-serif;line-height:1.9;margin:0.5em 0\">",
        );
        s += &format!(
            "<div style=\"font-weight:bold\">{}</div><div style=\"color:#555;font-size:90%\">query: {} &middot; MaxSim {:.4} &middot; k&#771; = {}{}</div>",
            escape_html(which.title()),
            escape_html(&self.query),
            self.score,
            self.k_tilde,
            if which == RelevanceKind::Density {
                format!(" &middot; bandwidth {:.2} tokens", self.bandwidth)
            } else {
                String::new()
            }
        );
        s += "<div>";
        let mut order: Vec<usize> = (0..self.tokens.len()).collect();
        order.sort_by_key(|&j| self.offsets.get(j).map(|o| o.0).unwrap_or(usize::MAX));
        let mut pos = 0usize;
        for j in order {
            let (start, end) = self.offsets.get(j).copied().unwrap_or((pos, pos));
            let piece = match (start >= pos, self.text.get(start..end)) {
                (true, Some(p)) => {
                    if let Some(gap) = self.text.get(pos..start) {
                        s += &escape_html(gap);
                    }
                    pos = end;
                    p.to_string()
                }
                // Overlapping or out-of-range span: show the token itself.
                _ => format!(" {}", self.tokens[j]),
            };
            let alpha = if max > 0.0 {
                (values[j].max(0.0) / max).clamp(0.0, 1.0)
            } else {
                0.0
            };
            s += &format!(
                "<span style=\"background:rgba({r},{g},{b},{alpha:.3});border-radius:3px\" title=\"#{j} {}: R_abs={} R_acc={:.3} density={:.4}\">{}</span>",
                escape_html(&self.tokens[j]),
                self.r_abs[j],
                self.r_acc[j],
                self.density[j],
                escape_html(&piece)
            );
        }
        if let Some(rest) = self.text.get(pos..) {
            s += &escape_html(rest);
        }
        s += "</div>";
        s += &format!(
            "<div style=\"font-size:85%;color:#555;margin-top:0.3em\">0 <span style=\"display:inline-block;width:140px;height:0.8em;vertical-align:middle;background:linear-gradient(to right,rgba({r},{g},{b},0),rgba({r},{g},{b},1))\"></span> {max:.4} ({})</div>",
            escape_html(which.title())
        );
        s + "</div>"
    }

    /// All three measures stacked (KDE, absolute count, accumulated similarity — the order
    /// of report 003's Figures 9, 11 and 12).
    pub fn to_html_all(&self) -> String {
        [
            RelevanceKind::Density,
            RelevanceKind::Absolute,
            RelevanceKind::Accumulated,
        ]
        .iter()
        .map(|&k| self.to_html(k))
        .collect()
    }

    /// evcxr display hook: the three measures as HTML.
    pub fn evcxr_display(&self) {
        crate::display::emit("text/html", &self.to_html_all());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kde_scott_rule_by_hand() {
        // samples 0, 1, 2, 3: sd (ddof 1) = 1.290994, n^(-1/5) = 0.757858 → h = 0.978391;
        // density at 1.5 = Σ φ((1.5 − x_i)/h) / (n h) = 0.241865 (computed independently
        // in f64; scipy.stats.gaussian_kde uses the same Scott factor on the ddof-1 covariance).
        let (d, h) = gaussian_kde(&[0.0, 1.0, 2.0, 3.0], &[1.5], None);
        assert!((h - 0.978_391).abs() < 1e-5, "{h}");
        assert!((d[0] - 0.241_865).abs() < 1e-5, "{}", d[0]);
        let (_, h1) = gaussian_kde(&[5.0, 5.0], &[5.0], None);
        assert_eq!(h1, 1.0);
    }

    #[test]
    fn html_escapes_and_has_legend() {
        let tr = TokenRelevance {
            query: "a<b".into(),
            query_tokens: vec!["a".into()],
            text: "x <y> & z".into(),
            tokens: vec![
                "x".into(),
                "<".into(),
                "y".into(),
                ">".into(),
                "&".into(),
                "z".into(),
            ],
            offsets: vec![(0, 1), (2, 3), (3, 4), (4, 5), (6, 7), (8, 9)],
            r_abs: vec![0, 1, 2, 0, 0, 1],
            r_acc: vec![0.0, 0.5, 1.0, 0.0, 0.0, 0.4],
            density: vec![0.1, 0.2, 0.3, 0.2, 0.1, 0.05],
            bandwidth: 1.0,
            k_tilde: 1,
            score: 0.5,
        };
        let html = tr.to_html(RelevanceKind::Absolute);
        assert!(!html.contains("<y>") && html.contains("&lt;") && html.contains("&amp;"));
        assert!(html.contains("a&lt;b"));
        assert!(html.contains("rgba(31,119,180,1.000)"), "{html}");
        assert!(html.contains("linear-gradient"));
        assert_eq!(tr.argmax(RelevanceKind::Density), Some(2));
    }
}
