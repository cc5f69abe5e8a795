//! t-SNE to two dimensions with linfa-tsne (Barnes-Hut), seeded.

use crate::{Error, Result};
use linfa::traits::Transformer;
use ndarray::Array2;
use rand::SeedableRng;
use serde::{Deserialize, Serialize};

/// Parameters of [`tsne_2d`]. Defaults follow the usual t-SNE settings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TsneParams {
    /// Perplexity (effective number of neighbours). Default 30.
    pub perplexity: f64,
    /// Barnes-Hut approximation threshold θ (0 = exact). Default 0.5.
    pub theta: f64,
    /// Gradient-descent iterations. Default 1000.
    pub max_iter: usize,
    /// Seed of the initial embedding. Default 42.
    pub seed: u64,
}

impl Default for TsneParams {
    fn default() -> Self {
        TsneParams {
            perplexity: 30.0,
            theta: 0.5,
            max_iter: 1000,
            seed: 42,
        }
    }
}

/// Project row vectors to 2-D. Needs more than `3 × perplexity` rows, all of the same length.
pub fn tsne_2d(vectors: &[Vec<f32>], params: &TsneParams) -> Result<Vec<(f64, f64)>> {
    let n = vectors.len();
    let dim = vectors.first().map(Vec::len).unwrap_or(0);
    if n == 0 || dim < 2 {
        return Err(Error::Empty(
            "t-SNE needs at least one vector of 2 or more dimensions".into(),
        ));
    }
    if ((n - 1) as f64) < 3.0 * params.perplexity {
        return Err(Error::param(
            "perplexity",
            format!(
                "{} is too large for {n} points (needs n − 1 ≥ 3 × perplexity)",
                params.perplexity
            ),
        ));
    }
    if let Some(i) = vectors.iter().position(|v| v.len() != dim) {
        return Err(Error::param(
            "vectors",
            format!(
                "row {i} has {} dimensions, row 0 has {dim}",
                vectors[i].len()
            ),
        ));
    }
    let flat: Vec<f64> = vectors
        .iter()
        .flat_map(|v| v.iter().map(|&x| x as f64))
        .collect();
    let data = Array2::from_shape_vec((n, dim), flat)
        .map_err(|e| Error::param("vectors", e.to_string()))?;
    let rng = rand_chacha::ChaCha8Rng::seed_from_u64(params.seed);
    let out = linfa_tsne::TSneParams::embedding_size_with_rng(2, rng)
        .perplexity(params.perplexity)
        .approx_threshold(params.theta)
        .max_iter(params.max_iter)
        .transform(data)
        .map_err(|e| Error::param("tsne", e.to_string()))?;
    Ok(out.rows().into_iter().map(|r| (r[0], r[1])).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two well-separated Gaussian blobs stay separated, and the seed makes it repeatable.
    #[test]
    fn separates_blobs_and_is_seeded() {
        use rand::Rng;
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let mut v = Vec::new();
        for c in 0..2 {
            for _ in 0..60 {
                v.push(
                    (0..16)
                        .map(|d| rng.gen::<f32>() * 0.1 + if d == 0 { c as f32 * 5.0 } else { 0.0 })
                        .collect::<Vec<f32>>(),
                );
            }
        }
        let p = TsneParams {
            perplexity: 10.0,
            max_iter: 500,
            ..Default::default()
        };
        let a = tsne_2d(&v, &p).unwrap();
        assert_eq!(a, tsne_2d(&v, &p).unwrap());
        let centre = |s: &[(f64, f64)]| {
            let n = s.len() as f64;
            (
                s.iter().map(|x| x.0).sum::<f64>() / n,
                s.iter().map(|x| x.1).sum::<f64>() / n,
            )
        };
        let spread = |s: &[(f64, f64)], c: (f64, f64)| {
            (s.iter()
                .map(|x| (x.0 - c.0).powi(2) + (x.1 - c.1).powi(2))
                .sum::<f64>()
                / s.len() as f64)
                .sqrt()
        };
        let (c0, c1) = (centre(&a[..60]), centre(&a[60..]));
        let gap = ((c0.0 - c1.0).powi(2) + (c0.1 - c1.1).powi(2)).sqrt();
        assert!(
            gap > 2.0 * spread(&a[..60], c0).max(spread(&a[60..], c1)),
            "gap {gap}"
        );
        assert!(tsne_2d(&v[..20], &TsneParams::default()).is_err());
    }
}
