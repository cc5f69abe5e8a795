//! MaxSim kernels: mean over query tokens of the best cosine with any passage token.

use super::EMPTY_PASSAGE_SCORE;
use half::f16;

/// Dot product with eight independent accumulators (vectorises well).
#[inline]
pub(crate) fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for ((a, xv), yv) in acc.iter_mut().zip(x).zip(y) {
            *a += xv * yv;
        }
    }
    let mut s: f32 = acc.iter().sum();
    for (x, y) in ra.iter().zip(rb) {
        s += x * y;
    }
    s
}

fn mean_of_best(best: &[f32], n_doc: usize) -> f32 {
    if best.is_empty() {
        return 0.0;
    }
    if n_doc == 0 {
        return EMPTY_PASSAGE_SCORE;
    }
    best.iter().sum::<f32>() / best.len() as f32
}

/// Mean-MaxSim of a query matrix `q` (`|q| × dim`) against a passage matrix `d`
/// (`|d| × dim`), both row-major with L2-normalised rows (so dot = cosine).
///
/// Fused single pass: each passage row is read once and updates the running maximum of
/// every query row. An empty passage scores [`EMPTY_PASSAGE_SCORE`]; an empty query 0.
pub fn maxsim(q: &[f32], d: &[f32], dim: usize) -> f32 {
    let nq = q.len() / dim;
    let mut best = vec![f32::NEG_INFINITY; nq];
    for drow in d.chunks_exact(dim) {
        for (b, qrow) in best.iter_mut().zip(q.chunks_exact(dim)) {
            let s = dot(qrow, drow);
            if s > *b {
                *b = s;
            }
        }
    }
    mean_of_best(&best, d.len() / dim)
}

/// [`maxsim`] against passage vectors stored as `f16` (each row widened to `f32` once).
pub fn maxsim_f16(q: &[f32], d: &[f16], dim: usize) -> f32 {
    let nq = q.len() / dim;
    let mut best = vec![f32::NEG_INFINITY; nq];
    let mut row = vec![0f32; dim];
    for drow in d.chunks_exact(dim) {
        for (r, x) in row.iter_mut().zip(drow) {
            *r = x.to_f32();
        }
        for (b, qrow) in best.iter_mut().zip(q.chunks_exact(dim)) {
            let s = dot(qrow, &row);
            if s > *b {
                *b = s;
            }
        }
    }
    mean_of_best(&best, d.len() / dim)
}

/// The textbook definition, for tests: for each query row, the maximum over passage rows
/// of the explicit cosine `q·d / (‖q‖‖d‖)`, averaged. Rows need not be normalised.
pub fn maxsim_naive(q: &[f32], d: &[f32], dim: usize) -> f32 {
    let nq = q.len() / dim;
    let nd = d.len() / dim;
    if nq == 0 {
        return 0.0;
    }
    if nd == 0 {
        return EMPTY_PASSAGE_SCORE;
    }
    let mut total = 0f64;
    for qi in q.chunks_exact(dim) {
        let mut best = f64::NEG_INFINITY;
        for dj in d.chunks_exact(dim) {
            let mut num = 0f64;
            let mut nq2 = 0f64;
            let mut nd2 = 0f64;
            for (&a, &b) in qi.iter().zip(dj) {
                let (a, b) = (a as f64, b as f64);
                num += a * b;
                nq2 += a * a;
                nd2 += b * b;
            }
            let cos = num / (nq2.sqrt() * nd2.sqrt()).max(1e-12);
            if cos > best {
                best = cos;
            }
        }
        total += best;
    }
    (total / nq as f64) as f32
}

/// True when `len` values make whole rows of `dim` (`dim > 0`).
pub(crate) fn whole_rows(len: usize, dim: usize) -> bool {
    len / dim * dim == len
}

/// L2-normalise every `dim`-long row in place (a zero row stays zero).
pub fn normalize_rows(m: &mut [f32], dim: usize) {
    for row in m.chunks_exact_mut(dim) {
        let n = row.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
        for x in row {
            *x /= n;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn unit_rows(rows: &[&[f32]]) -> Vec<f32> {
        let dim = rows[0].len();
        let mut m: Vec<f32> = rows.iter().flat_map(|r| r.iter().copied()).collect();
        normalize_rows(&mut m, dim);
        m
    }

    #[test]
    fn maxsim_by_hand() {
        let q = unit_rows(&[&[1.0, 0.0], &[0.0, 1.0]]);
        let d = unit_rows(&[&[1.0, 0.0], &[1.0, 1.0]]);
        // q1: max(1, .7071) = 1; q2: max(0, .7071) = .7071 → mean .85355
        let want = (1.0 + std::f32::consts::FRAC_1_SQRT_2) / 2.0;
        assert!((maxsim(&q, &d, 2) - want).abs() < 1e-6);
        assert!((maxsim_naive(&q, &d, 2) - want).abs() < 1e-6);
        assert_eq!(maxsim(&q, &[], 2), EMPTY_PASSAGE_SCORE);
    }
}
