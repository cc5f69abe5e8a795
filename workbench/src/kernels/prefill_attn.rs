//! Attention of a prompt's new positions over the KV cache (prefill), without tensor
//! operations.
//!
//! With tensor operations a KV head's prefill attention is five passes over a
//! `[group · t, kv_len]` score matrix, each a new tensor (the product, the scale, the causal
//! mask, the softmax with a scalar `exp`, the product with the values). Here the rows are
//! one buffer per layer: each KV head's scores are written there by one product, each row
//! is scaled, masked and normalised in place (rows shared out over candle's thread pool),
//! and the second product reads it. The arithmetic is the tensor operations' step for step
//! (the `gemm` crate's products with the same shapes and strides — gemm's blocking depends
//! on the shapes, so the products are not cut further — and candle's `exp`, max and sum):
//! the output is the same to the bit, so greedy answers do not move.

use super::cpu::switched_off;
use super::gemm::{gemm, Mat};

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

/// Score rows per softmax task.
const ROWS: usize = 16;

/// `softmax(q · K_jᵀ · scale + causal mask) · V_j` for every query row: `q` is
/// `[n_kv_head, group · t, head_dim]` (the `group` query heads sharing KV head `j`
/// consecutive, `t` rows each, row `i` being position `pos + i`), `k` and `v` the cache
/// `[n_kv_head, cap, head_dim]` holding positions `0..pos + t`. Returns `q`'s shape, or
/// `None` for shapes it does not handle or with `WORKBENCH_LLM_NO_ATTN` set.
pub(crate) fn attend(q: &[f32], k: &[f32], v: &[f32], s: Shape, scale: f32) -> Option<Vec<f32>> {
    use rayon::prelude::*;
    let (nkv, hd, cap) = (s.n_kv_head, s.head_dim, s.cap);
    let kv_len = s.pos + s.t;
    if switched_off("WORKBENCH_LLM_NO_ATTN")
        || nkv == 0
        || !s.n_head.is_multiple_of(nkv)
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
    let threads = rayon::current_num_threads();
    let par = match threads {
        1 => ::gemm::Parallelism::None,
        n => ::gemm::Parallelism::Rayon(n),
    };
    let mut y = vec![0f32; q.len()];
    let mut sc = vec![0f32; rows * kv_len];
    for (j, yj) in y.chunks_exact_mut(rows * hd).enumerate() {
        let qj = &q[j * rows * hd..(j + 1) * rows * hd];
        let kj = &k[j * cap * hd..(j * cap + kv_len) * hd];
        let vj = &v[j * cap * hd..(j * cap + kv_len) * hd];
        // sc (rows × kv_len), qj (rows × hd) and kj (kv_len × hd) are row-major with
        // exactly those sizes; sc is written without being read.
        let (qm, km) = (Mat::rows(qj, rows, hd), Mat::rows(kj, kv_len, hd));
        gemm(
            &mut sc,
            0,
            kv_len,
            qm.ok()?,
            km.ok()?.t(),
            false,
            0.0,
            1.0,
            par,
        )
        .ok()?;
        // Row r of the group is position pos + r % t: it sees keys 0..=pos + r % t.
        sc.par_chunks_mut(kv_len * ROWS)
            .enumerate()
            .for_each(|(c, block)| {
                for (i, row) in block.chunks_exact_mut(kv_len).enumerate() {
                    causal_softmax(row, s.pos + (c * ROWS + i) % s.t + 1, scale);
                }
            });
        // yj (rows × hd), sc (rows × kv_len) and vj (kv_len × hd) are row-major with
        // exactly those sizes; yj is written without being read.
        let (sm, vm) = (Mat::rows(&sc, rows, kv_len), Mat::rows(vj, kv_len, hd));
        gemm(yj, 0, hd, sm.ok()?, vm.ok()?, false, 0.0, 1.0, par).ok()?;
    }
    Some(y)
}

/// One row of scores in place: scaled, the positions from `sees` on masked, softmax — the
/// arithmetic of candle's `x * scale`, `+ mask` (0 or −∞) and `softmax_last_dim`, step for
/// step (the same `exp`, the same max and sum kernels over the whole row), so the result is
/// the tensor operations' to the bit.
fn causal_softmax(row: &mut [f32], sees: usize, scale: f32) {
    use candle_core::cpu::kernels::VecOps;
    let sees = sees.min(row.len());
    for x in &mut row[..sees] {
        *x = *x * scale + 0.0;
    }
    row[sees..].fill(f32::NEG_INFINITY);
    if row.is_empty() {
        return;
    }
    let (mut max, mut sum) = (f32::NEG_INFINITY, 0f32);
    // SAFETY: `row` is non-empty and holds row.len() floats; max and sum are valid.
    unsafe { f32::vec_reduce_max(row.as_ptr(), &mut max, row.len()) };
    for x in row.iter_mut() {
        *x = (*x - max).exp();
    }
    // SAFETY: as above.
    unsafe { f32::vec_reduce_sum(row.as_ptr(), &mut sum, row.len()) };
    for x in row.iter_mut() {
        *x /= sum;
    }
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

    /// The same numbers, to the bit, as the tensor operations the model used before (one
    /// KV head at a time: product, `* scale`, `+ mask`, `softmax_last_dim`, product).
    #[test]
    fn equals_the_tensor_operations_to_the_bit() {
        use candle_core::{Device, Tensor};
        let dev = Device::Cpu;
        for (pos, t, hd) in [(0, 70, 64), (9, 33, 128)] {
            let (nkv, group, cap) = (2, 3, 128);
            let s = Shape {
                n_head: nkv * group,
                n_kv_head: nkv,
                head_dim: hd,
                cap,
                pos,
                t,
            };
            let kv_len = pos + t;
            let rows = group * t;
            let q = values(nkv * rows * hd, 4);
            let k = values(nkv * cap * hd, 5);
            let v = values(nkv * cap * hd, 6);
            let scale = 1.0 / (hd as f64).sqrt();
            let y = attend(&q, &k, &v, s, scale as f32).expect("handled");
            let mut m = vec![0f32; rows * kv_len];
            for r in 0..rows {
                for c in pos + r % t + 1..kv_len {
                    m[r * kv_len + c] = f32::NEG_INFINITY;
                }
            }
            let mask = Tensor::from_vec(m, (rows, kv_len), &dev).unwrap();
            let qt = Tensor::from_vec(q.clone(), (nkv, rows, hd), &dev).unwrap();
            let kt = Tensor::from_vec(k.clone(), (nkv, cap, hd), &dev).unwrap();
            let vt = Tensor::from_vec(v.clone(), (nkv, cap, hd), &dev).unwrap();
            for j in 0..nkv {
                let kc = kt.get(j).unwrap().narrow(0, 0, kv_len).unwrap();
                let vc = vt.get(j).unwrap().narrow(0, 0, kv_len).unwrap();
                let att = (qt.get(j).unwrap().matmul(&kc.t().unwrap()).unwrap() * scale).unwrap();
                let att = att.broadcast_add(&mask).unwrap();
                let att = candle_nn::ops::softmax_last_dim(&att).unwrap();
                let want: Vec<f32> = att
                    .matmul(&vc)
                    .unwrap()
                    .flatten_all()
                    .unwrap()
                    .to_vec1()
                    .unwrap();
                let got = &y[j * rows * hd..(j + 1) * rows * hd];
                let same = got
                    .iter()
                    .zip(&want)
                    .filter(|(a, b)| a.to_bits() == b.to_bits())
                    .count();
                assert_eq!(
                    same,
                    want.len(),
                    "pos {pos}, t {t}, head {j}: {same} of {} equal",
                    want.len()
                );
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
