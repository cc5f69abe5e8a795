//! MaxSim kernels: mean over query tokens of the best cosine with any passage token.

use super::EMPTY_PASSAGE_SCORE;
use crate::kernels::gemm::{gemm, Mat};
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

/// [`maxsim`] against passage vectors stored as `f16`: the rows are widened to `f32`
/// (a per-thread buffer), the `|q| × |d|` similarities come from one matrix product
/// (the `gemm` crate, single-threaded), and each query row keeps its maximum.
///
/// Every stored-vector path ([`TokenStore::score`](super::TokenStore::score): re-rank with
/// a store, exact and approximate end-to-end, exhaustive search) goes through this
/// function, so they give bit-identical scores for the same pair.
pub fn maxsim_f16(q: &[f32], d: &[f16], dim: usize) -> f32 {
    use half::slice::HalfFloatSliceExt;
    use std::cell::RefCell;
    thread_local! {
        static BUF: RefCell<(Vec<f32>, Vec<f32>)> = const { RefCell::new((Vec::new(), Vec::new())) };
    }
    let nq = q.len() / dim;
    let nd = d.len() / dim;
    if nq == 0 {
        return 0.0;
    }
    if nd == 0 {
        return EMPTY_PASSAGE_SCORE;
    }
    BUF.with(|buf| {
        let mut buf = buf.borrow_mut();
        let (rows, sims) = &mut *buf;
        rows.resize(nd * dim, 0.0);
        d[..nd * dim].convert_to_f32_slice(rows);
        sims.resize(nq * nd, 0.0);
        // q is row-major nq × dim; `rows` is row-major nd × dim, read as its transpose;
        // `sims` is row-major nq × nd, written without being read.
        let q = Mat::rows(q, nq, dim).expect("nq · dim ≤ q.len()");
        let d = Mat::rows(rows, nd, dim).expect("nd × dim").t();
        gemm(
            sims,
            0,
            nd,
            q,
            d,
            false,
            0.0,
            1.0,
            ::gemm::Parallelism::None,
        )
        .expect("shapes of the buffers above");
        let best: f32 = sims
            .chunks_exact(nd)
            .map(|r| r.iter().copied().fold(f32::NEG_INFINITY, f32::max))
            .sum();
        best / nq as f32
    })
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
        let d16: Vec<f16> = d.iter().map(|&x| f16::from_f32(x)).collect();
        assert!((maxsim_f16(&q, &d16, 2) - want).abs() < 1e-3);
        assert_eq!(maxsim_f16(&q, &[], 2), EMPTY_PASSAGE_SCORE);
        assert_eq!(maxsim_f16(&[], &d16, 2), 0.0);
    }

    /// The matrix-product `f16` kernel equals the textbook definition on the widened rows,
    /// for shapes around gemm's blocking sizes.
    #[test]
    fn maxsim_f16_equals_naive_on_widened_rows() {
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
        };
        for (nq, nd, dim) in [
            (1, 1, 1),
            (3, 5, 7),
            (15, 160, 384),
            (32, 33, 64),
            (7, 300, 24),
        ] {
            let mut q: Vec<f32> = (0..nq * dim).map(|_| next()).collect();
            let mut d: Vec<f32> = (0..nd * dim).map(|_| next()).collect();
            normalize_rows(&mut q, dim);
            normalize_rows(&mut d, dim);
            let d16: Vec<f16> = d.iter().map(|&x| f16::from_f32(x)).collect();
            let widened: Vec<f32> = d16.iter().map(|x| x.to_f32()).collect();
            let got = maxsim_f16(&q, &d16, dim);
            // The naive cosine renormalises the widened rows; the kernel takes dot products.
            let mut want = 0f64;
            for qr in q.chunks_exact(dim) {
                let best = widened
                    .chunks_exact(dim)
                    .map(|dr| {
                        qr.iter()
                            .zip(dr)
                            .map(|(a, b)| *a as f64 * *b as f64)
                            .sum::<f64>()
                    })
                    .fold(f64::NEG_INFINITY, f64::max);
                want += best;
            }
            let want = (want / nq as f64) as f32;
            assert!(
                (got - want).abs() < 1e-5,
                "{nq}×{nd}×{dim}: {got} vs {want}"
            );
            assert_eq!(got, maxsim_f16(&q, &d16, dim), "deterministic");
        }
    }
}
