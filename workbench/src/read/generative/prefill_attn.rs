//! Attention of a prompt's new positions over the KV cache (prefill), without tensor
//! operations.
//!
//! With tensor operations a KV head's prefill attention is five passes over a
//! `[group · t, kv_len]` score matrix, each a new tensor (the product, the scale, the causal
//! mask, the softmax with a scalar `exp`, the product with the values). Here the rows are
//! cut into blocks shared out over candle's thread pool; each block's scores go into one
//! buffer (scale folded into the product), each row's softmax runs over the positions it may
//! see with the vectorised kernel of `encode::fast_bert` (the rest set to 0), and the
//! products read only the keys and values some row of the block sees. Products through the
//! `gemm` crate, as candle's.

/// Shapes of one layer's prefill attention.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shape {
    pub n_head: usize,
    pub n_kv_head: usize,
    pub head_dim: usize,
    /// Positions the cache has room for (its second dimension).
    pub cap: usize,
    /// Positions already in the cache before this prompt.
    pub pos: usize,
    /// New positions.
    pub t: usize,
}

/// Query rows per block.
const BLOCK: usize = 32;

/// `softmax(q · K_jᵀ · scale + causal mask) · V_j` for every query row: `q` is
/// `[n_kv_head, group · t, head_dim]` (the `group` query heads sharing KV head `j`
/// consecutive, `t` rows each, row `i` being position `pos + i`), `k` and `v` the cache
/// `[n_kv_head, cap, head_dim]` holding positions `0..pos + t`. Returns `q`'s shape, or
/// `None` for shapes it does not handle or with `WORKBENCH_LLM_NO_ATTN` set.
pub(crate) fn attend(q: &[f32], k: &[f32], v: &[f32], s: Shape, scale: f32) -> Option<Vec<f32>> {
    use rayon::prelude::*;
    let (nkv, hd, cap) = (s.n_kv_head, s.head_dim, s.cap);
    let kv_len = s.pos + s.t;
    if super::switched_off("WORKBENCH_LLM_NO_ATTN")
        || nkv == 0
        || s.n_head % nkv != 0
        || s.t == 0
        || kv_len > cap
        || k.len() != nkv * cap * hd
        || v.len() != k.len()
    {
        return None;
    }
    let rows = (s.n_head / nkv) * s.t;
    if q.len() != nkv * rows * hd {
        return None;
    }
    let mut y = vec![0f32; q.len()];
    let blocks = y.par_chunks_mut(rows * hd).enumerate().flat_map(|(j, yj)| {
        yj.par_chunks_mut(BLOCK * hd)
            .enumerate()
            .map(move |(b, yb)| (j, b * BLOCK, yb))
    });
    blocks.for_each_init(
        || vec![0f32; BLOCK * kv_len],
        |scores, (j, r0, yb)| {
            let n = yb.len() / hd;
            // Row r of the group is position pos + r % t: it sees keys 0..=pos + r % t.
            let sees = |r: usize| s.pos + (r0 + r) % s.t + 1;
            let keys = (0..n).map(sees).max().unwrap_or(0);
            let qb = &q[(j * rows + r0) * hd..(j * rows + r0 + n) * hd];
            let kj = &k[j * cap * hd..(j * cap + keys) * hd];
            let vj = &v[j * cap * hd..(j * cap + keys) * hd];
            let sc = &mut scores[..n * keys];
            // SAFETY: sc (n × keys), qb (n × hd) and kj (keys × hd) are row-major with
            // exactly those sizes; sc is written without being read.
            unsafe {
                gemm::gemm(
                    n,
                    keys,
                    hd,
                    sc.as_mut_ptr(),
                    1,
                    keys as isize,
                    false,
                    qb.as_ptr(),
                    1,
                    hd as isize,
                    kj.as_ptr(),
                    hd as isize,
                    1,
                    0.0,
                    scale,
                    false,
                    false,
                    false,
                    gemm::Parallelism::None,
                );
            }
            for (r, row) in sc.chunks_exact_mut(keys).enumerate() {
                let m = sees(r);
                crate::encode::fast_bert::softmax_row(&mut row[..m]);
                row[m..].fill(0.0);
            }
            // SAFETY: yb (n × hd), sc (n × keys) and vj (keys × hd) are row-major with
            // exactly those sizes; yb is written without being read.
            unsafe {
                gemm::gemm(
                    n,
                    hd,
                    keys,
                    yb.as_mut_ptr(),
                    1,
                    hd as isize,
                    false,
                    sc.as_ptr(),
                    1,
                    keys as isize,
                    vj.as_ptr(),
                    1,
                    hd as isize,
                    0.0,
                    1.0,
                    false,
                    false,
                    false,
                    gemm::Parallelism::None,
                );
            }
        },
    );
    Some(y)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The definition in f64: every row's softmax over the keys it may see.
    fn reference(q: &[f32], k: &[f32], v: &[f32], s: Shape, scale: f32) -> Vec<f64> {
        let (nkv, hd, cap) = (s.n_kv_head, s.head_dim, s.cap);
        let rows = (s.n_head / nkv) * s.t;
        let mut y = vec![0f64; q.len()];
        for j in 0..nkv {
            for r in 0..rows {
                let qr = &q[(j * rows + r) * hd..(j * rows + r + 1) * hd];
                let sees = s.pos + r % s.t + 1;
                let sc: Vec<f64> = (0..sees)
                    .map(|p| {
                        let kr = &k[(j * cap + p) * hd..(j * cap + p + 1) * hd];
                        qr.iter().zip(kr).map(|(a, b)| (a * b) as f64).sum::<f64>() * scale as f64
                    })
                    .collect();
                let m = sc.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let e: Vec<f64> = sc.iter().map(|x| (x - m).exp()).collect();
                let z: f64 = e.iter().sum();
                for (p, w) in e.iter().enumerate() {
                    let vr = &v[(j * cap + p) * hd..(j * cap + p + 1) * hd];
                    for c in 0..hd {
                        y[(j * rows + r) * hd + c] += w / z * vr[c] as f64;
                    }
                }
            }
        }
        y
    }

    fn values(n: usize, seed: usize) -> Vec<f32> {
        (0..n)
            .map(|i| (((i * 7919 + seed * 104_729) % 1000) as f32 / 500.0) - 1.0)
            .collect()
    }

    #[test]
    fn matches_the_definition() {
        // A first prompt (pos 0) and a continuation (pos 5), rows not a multiple of the
        // block, two query heads per KV head.
        for (pos, t) in [(0, 37), (5, 20), (3, 1)] {
            let s = Shape {
                n_head: 4,
                n_kv_head: 2,
                head_dim: 8,
                cap: 64,
                pos,
                t,
            };
            let q = values(2 * 2 * t * 8, 1);
            let k = values(2 * 64 * 8, 2);
            let v = values(2 * 64 * 8, 3);
            let y = attend(&q, &k, &v, s, 0.35).expect("handled");
            let want = reference(&q, &k, &v, s, 0.35);
            for (a, b) in y.iter().zip(&want) {
                assert!((*a as f64 - b).abs() < 1e-5, "pos {pos}, t {t}: {a} vs {b}");
            }
        }
    }

    #[test]
    fn shapes_it_does_not_handle_are_declined() {
        let s = Shape {
            n_head: 4,
            n_kv_head: 2,
            head_dim: 8,
            cap: 16,
            pos: 10,
            t: 8,
        };
        let (q, k) = (values(2 * 2 * 8 * 8, 1), values(2 * 16 * 8, 2));
        // More positions than the cache holds; a query of the wrong length.
        assert!(attend(&q, &k, &k, s, 1.0).is_none());
        let s = Shape { pos: 0, ..s };
        assert!(attend(&q[1..], &k, &k, s, 1.0).is_none());
        assert!(attend(&q, &k, &k, s, 1.0).is_some());
    }
}
