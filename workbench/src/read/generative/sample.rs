//! Picking the next token from logits: greedy, or seeded temperature + nucleus (top-p).

use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// Index of the largest logit (the first one on ties, as llama.cpp's greedy sampler).
pub(crate) fn argmax(logits: &[f32]) -> u32 {
    let mut best = 0usize;
    let mut bv = f32::NEG_INFINITY;
    for (i, &v) in logits.iter().enumerate() {
        if v > bv {
            bv = v;
            best = i;
        }
    }
    best as u32
}

/// The natural-log probability of token `id` under `softmax(logits)` (temperature 1: the
/// model's own distribution, whatever the sampler), computed in f64.
pub(crate) fn log_prob(logits: &[f32], id: u32) -> f32 {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let sum: f64 = logits.iter().map(|&l| (l as f64 - max).exp()).sum();
    let l = logits
        .get(id as usize)
        .copied()
        .unwrap_or(f32::NEG_INFINITY) as f64;
    (l - max - sum.ln()) as f32
}

/// Sample from `softmax(logits / temperature)` restricted to the smallest set of most
/// probable tokens whose probability reaches `top_p`.
pub(crate) fn top_p(logits: &[f32], temperature: f32, top_p: f32, rng: &mut ChaCha8Rng) -> u32 {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut probs: Vec<(u32, f32)> = logits
        .iter()
        .enumerate()
        .map(|(i, &l)| (i as u32, ((l - max) / temperature).exp()))
        .filter(|&(_, p)| p > 0.0)
        .collect();
    let total: f32 = probs.iter().map(|p| p.1).sum();
    // Descending probability, ties by id so the order (and the draw) is deterministic.
    probs.sort_unstable_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut keep = probs.len();
    let mut cum = 0f32;
    for (i, p) in probs.iter().enumerate() {
        cum += p.1 / total;
        if cum >= top_p {
            keep = i + 1;
            break;
        }
    }
    probs.truncate(keep.max(1));
    let kept: f32 = probs.iter().map(|p| p.1).sum();
    let mut r = rng.gen::<f32>() * kept;
    for &(id, p) in &probs {
        if r < p {
            return id;
        }
        r -= p;
    }
    probs[probs.len() - 1].0
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn log_prob_is_the_log_softmax_of_the_token() {
        let l = [1.0f32, 2.0, 3.0];
        let z = (1f64.exp() + 2f64.exp() + 3f64.exp()).ln();
        assert!((log_prob(&l, 2) as f64 - (3.0 - z)).abs() < 1e-6);
        assert!((log_prob(&l, 0) as f64 - (1.0 - z)).abs() < 1e-6);
        // Shifting every logit changes nothing.
        let shifted = [101.0f32, 102.0, 103.0];
        assert!((log_prob(&shifted, 2) - log_prob(&l, 2)).abs() < 1e-5);
    }

    #[test]
    fn greedy_and_nucleus() {
        let l = [0.1, 3.0, 2.9, -1.0];
        assert_eq!(argmax(&l), 1);
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        // top_p tiny: only the best token survives.
        for _ in 0..20 {
            assert_eq!(top_p(&l, 1.0, 0.01, &mut rng), 1);
        }
        // top_p 1: both close tokens get drawn.
        let draws: Vec<u32> = (0..200).map(|_| top_p(&l, 1.0, 1.0, &mut rng)).collect();
        assert!(draws.contains(&1) && draws.contains(&2));
        let a: Vec<u32> = {
            let mut r = ChaCha8Rng::seed_from_u64(7);
            (0..50).map(|_| top_p(&l, 0.8, 0.9, &mut r)).collect()
        };
        let b: Vec<u32> = {
            let mut r = ChaCha8Rng::seed_from_u64(7);
            (0..50).map(|_| top_p(&l, 0.8, 0.9, &mut r)).collect()
        };
        assert_eq!(a, b);
    }
}
