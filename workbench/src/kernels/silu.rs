//! The feed-forward gate `silu(g) · u` in one vectorised pass, bit for bit what candle's
//! `g.silu()? * u` computes.
//!
//! candle's SiLU is `g / (1 + exp(−g))` element by element, with `exp` from the C library
//! (glibc's `expf`: a 32-entry table of 2^(i/32) and a cubic in double precision), then a
//! second pass for the product. In a prompt's forward pass that is one scalar `expf` per
//! element of every layer's `[tokens, intermediate]` gate (some 4 M per layer for a
//! 450-token prompt of the 1.5B model). Here the same `expf` runs on AVX-512 (eight doubles
//! per vector, the same operations in the same order, fused multiply-adds where glibc's
//! FMA build has them), followed by the same single-precision add, divide and multiply,
//! so every output has the bits of the two-pass version. Inputs with `|g| ≥ 88` (or NaN),
//! where `expf` takes its overflow / underflow branches, go through the scalar `f32::exp`.
//!
//! Whether the C library's `expf` is that algorithm is checked, not assumed: before first
//! use, [`available`] compares the kernel with `f32::exp` on a probe set of inputs spread
//! over the whole range it handles, and uses it only if every result agrees to the bit.

use super::cpu::{features, switched_off, Avx512};
use candle_core::{Device, Storage, Tensor};

/// Whether the kernel runs here: x86-64 with AVX-512 F, `WORKBENCH_LLM_NO_SILU` unset, and
/// the kernel reproducing this machine's `f32::exp` on the probe set.
#[cfg(test)]
pub(crate) fn available() -> bool {
    token().is_some()
}

/// The token the kernel runs with, when it runs here (see [`silu_mul`]).
fn token() -> Option<Avx512> {
    static TOKEN: std::sync::OnceLock<Option<Avx512>> = std::sync::OnceLock::new();
    *TOKEN.get_or_init(|| {
        if switched_off("WORKBENCH_LLM_NO_SILU") {
            return None;
        }
        let avx512 = cpu_has_kernel()?;
        agrees_with_libm().then_some(avx512)
    })
}

fn cpu_has_kernel() -> Option<Avx512> {
    features().avx512()
}

/// Inputs of the probe: every 4,099th bit pattern of the floats in `(−88, 88)` and the
/// edges of that range, each with both signs.
fn probe_inputs() -> Vec<f32> {
    let mut xs: Vec<f32> = (0..LIMIT_BITS)
        .step_by(4099)
        .chain([0, 1, LIMIT_BITS - 1, 0x3f80_0000, 0x3f31_7218])
        .map(f32::from_bits)
        .collect();
    let neg: Vec<f32> = xs.iter().map(|x| -x).collect();
    xs.extend(neg);
    xs
}

/// Bits of 88.0: the kernel's own path covers `|x| < 88`.
const LIMIT_BITS: u32 = 0x42b0_0000;

fn agrees_with_libm() -> bool {
    let xs = probe_inputs();
    let mut got = vec![0f32; xs.len()];
    exp_slice(&xs, &mut got);
    xs.iter()
        .zip(&got)
        .all(|(x, g)| x.exp().to_bits() == g.to_bits())
}

/// `exp(x)` of every element through the kernel (scalar `f32::exp` without it).
fn exp_slice(xs: &[f32], out: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if let Some(avx512) = cpu_has_kernel() {
        let n16 = xs.len() / 16 * 16;
        for (x, o) in xs[..n16]
            .as_chunks::<16>()
            .0
            .iter()
            .zip(out[..n16].as_chunks_mut::<16>().0)
        {
            kernel::exp16(avx512, x, o);
        }
        for (x, o) in xs[n16..].iter().zip(&mut out[n16..]) {
            *o = x.exp();
        }
        return;
    }
    for (x, o) in xs.iter().zip(out) {
        *o = x.exp();
    }
}

/// `silu(gate) · up` (`gate`, `up`: f32 of one shape), or `None` when the kernel does not
/// apply (CPU, switched off, dtypes, layouts); the caller then does `gate.silu()? * up`.
pub(crate) fn silu_mul(gate: &Tensor, up: &Tensor) -> candle_core::Result<Option<Tensor>> {
    let Some(avx512) = token() else {
        return Ok(None);
    };
    if gate.shape() != up.shape() {
        return Ok(None);
    }
    let (gs, gl) = gate.storage_and_layout();
    let (us, ul) = up.storage_and_layout();
    let (Storage::Cpu(gc), Storage::Cpu(uc)) = (&*gs, &*us) else {
        return Ok(None);
    };
    let (Some((g0, g1)), Some((u0, u1))) = (gl.contiguous_offsets(), ul.contiguous_offsets())
    else {
        return Ok(None);
    };
    let (Ok(g), Ok(u)) = (gc.as_slice::<f32>(), uc.as_slice::<f32>()) else {
        return Ok(None);
    };
    let out = silu_mul_slices(avx512, &g[g0..g1], &u[u0..u1]);
    Ok(Some(Tensor::from_vec(out, gate.shape(), &Device::Cpu)?))
}

/// Elements per task of the thread pool.
const CHUNK: usize = 4096;

fn silu_mul_slices(avx512: Avx512, g: &[f32], u: &[f32]) -> Vec<f32> {
    let n = g.len();
    let mut out = vec![0f32; n];
    let out_ptr = out.as_mut_ptr() as usize;
    candle_core::utils::barrier_pool().execute_chunked(n.div_ceil(CHUNK), |range| {
        for c in range {
            let (a, b) = (c * CHUNK, ((c + 1) * CHUNK).min(n));
            // SAFETY: chunk c writes only elements a..b of `out`, which outlives the call.
            let o = unsafe { std::slice::from_raw_parts_mut((out_ptr as *mut f32).add(a), b - a) };
            silu_mul_chunk(avx512, &g[a..b], &u[a..b], o);
        }
    });
    out
}

/// One chunk: the kernel on whole vectors of 16, candle's scalar formula on the rest.
#[cfg_attr(not(target_arch = "x86_64"), allow(unused_variables))]
fn silu_mul_chunk(avx512: Avx512, g: &[f32], u: &[f32], o: &mut [f32]) {
    let n16 = g.len() / 16 * 16;
    #[cfg(target_arch = "x86_64")]
    for ((g, u), o) in g[..n16]
        .as_chunks::<16>()
        .0
        .iter()
        .zip(u[..n16].as_chunks::<16>().0)
        .zip(o[..n16].as_chunks_mut::<16>().0)
    {
        kernel::silu_mul16(avx512, g, u, o);
    }
    for ((g, u), o) in g[n16..].iter().zip(&u[n16..]).zip(&mut o[n16..]) {
        *o = silu_scalar(*g) * u;
    }
}

/// candle's SiLU of one element.
fn silu_scalar(v: f32) -> f32 {
    v / (1.0 + (-v).exp())
}

#[cfg(target_arch = "x86_64")]
mod kernel {
    use super::Avx512;
    use std::arch::x86_64::*;

    /// `tab[i]` = bits of 2^(i/32) (correctly rounded double) minus `i << 47`, so that
    /// adding `k << 47` to `tab[k % 32]` gives 2^(k/32) for an integer `k`.
    fn table() -> &'static [u64; 32] {
        static T: std::sync::OnceLock<[u64; 32]> = std::sync::OnceLock::new();
        T.get_or_init(|| {
            let mut t = [0u64; 32];
            for (i, e) in t.iter_mut().enumerate() {
                *e = 2f64
                    .powf(i as f64 / 32.0)
                    .to_bits()
                    .wrapping_sub((i as u64) << 47);
            }
            t
        })
    }

    /// 32 / ln 2, 1.5 · 2^52 (rounds to an integer in the low bits), and the cubic's
    /// coefficients for 2^(r/32).
    const INV_LN2_N: f64 = f64::from_bits(0x3ff7_1547_652b_82fe) * 32.0;
    const SHIFT: f64 = f64::from_bits(0x4338_0000_0000_0000);
    const C0: f64 = f64::from_bits(0x3fac_6af8_4b91_2394) / (32.0 * 32.0 * 32.0);
    const C1: f64 = f64::from_bits(0x3fce_bfce_50fa_c4f3) / (32.0 * 32.0);
    const C2: f64 = f64::from_bits(0x3fe6_2e42_ff0c_52d6) / 32.0;

    /// `expf` of eight floats widened to double, `|x| < 88`: the result in double before
    /// its rounding to single precision.
    #[target_feature(enable = "avx512f")]
    fn exp8(xd: __m512d, t: &[__m512i; 4]) -> __m256 {
        let kd0 = _mm512_fmadd_pd(_mm512_set1_pd(INV_LN2_N), xd, _mm512_set1_pd(SHIFT));
        let kd = _mm512_sub_pd(kd0, _mm512_set1_pd(SHIFT));
        let r = _mm512_fmsub_pd(_mm512_set1_pd(INV_LN2_N), xd, kd);
        let ki = _mm512_castpd_si512(kd0);
        // tab[ki % 32]: entries 0–15 from t[0..2], 16–31 from t[2..4], picked by bit 4.
        let lo = _mm512_permutex2var_epi64(t[0], ki, t[1]);
        let hi = _mm512_permutex2var_epi64(t[2], ki, t[3]);
        let upper = _mm512_test_epi64_mask(ki, _mm512_set1_epi64(16));
        let tk = _mm512_mask_blend_epi64(upper, lo, hi);
        let s = _mm512_castsi512_pd(_mm512_add_epi64(tk, _mm512_slli_epi64(ki, 47)));
        let z = _mm512_fmadd_pd(_mm512_set1_pd(C0), r, _mm512_set1_pd(C1));
        let r2 = _mm512_mul_pd(r, r);
        let y = _mm512_fmadd_pd(_mm512_set1_pd(C2), r, _mm512_set1_pd(1.0));
        let y = _mm512_fmadd_pd(z, r2, y);
        _mm512_cvtpd_ps(_mm512_mul_pd(y, s))
    }

    /// `expf` of 16 floats, or `None` when one of them is outside `|x| < 88` (or NaN).
    #[target_feature(enable = "avx512f")]
    fn exp16v(x: __m512) -> Option<__m512> {
        let abs = _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(0x7fff_ffff));
        if _mm512_cmpge_epu32_mask(abs, _mm512_set1_epi32(super::LIMIT_BITS as i32)) != 0 {
            return None;
        }
        let tab = table();
        // SAFETY: `tab` holds 32 u64, four vectors of eight.
        let t = unsafe {
            [
                _mm512_loadu_si512(tab.as_ptr().cast()),
                _mm512_loadu_si512(tab.as_ptr().add(8).cast()),
                _mm512_loadu_si512(tab.as_ptr().add(16).cast()),
                _mm512_loadu_si512(tab.as_ptr().add(24).cast()),
            ]
        };
        let xi = _mm512_castps_si512(x);
        let lo = _mm512_cvtps_pd(_mm256_castsi256_ps(_mm512_castsi512_si256(xi)));
        let hi = _mm512_cvtps_pd(_mm256_castsi256_ps(_mm512_extracti64x4_epi64::<1>(xi)));
        let (el, eh) = (exp8(lo, &t), exp8(hi, &t));
        let both = _mm512_inserti64x4::<1>(
            _mm512_castsi256_si512(_mm256_castps_si256(el)),
            _mm256_castps_si256(eh),
        );
        Some(_mm512_castsi512_ps(both))
    }

    /// `out[i] = exp(x[i])` for 16 elements.
    pub(super) fn exp16(_: Avx512, x: &[f32; 16], out: &mut [f32; 16]) {
        // SAFETY: the token proves AVX-512 F.
        unsafe { exp16_avx512(x, out) }
    }

    #[target_feature(enable = "avx512f")]
    fn exp16_avx512(x: &[f32; 16], out: &mut [f32; 16]) {
        // SAFETY: `x` holds 16 floats.
        match exp16v(unsafe { _mm512_loadu_ps(x.as_ptr()) }) {
            // SAFETY: `out` holds 16 floats.
            Some(e) => unsafe { _mm512_storeu_ps(out.as_mut_ptr(), e) },
            None => {
                for i in 0..16 {
                    out[i] = x[i].exp();
                }
            }
        }
    }

    /// `out[i] = g[i] / (1 + exp(−g[i])) · u[i]` for 16 elements, in candle's order.
    pub(super) fn silu_mul16(_: Avx512, g: &[f32; 16], u: &[f32; 16], out: &mut [f32; 16]) {
        // SAFETY: the token proves AVX-512 F.
        unsafe { silu_mul16_avx512(g, u, out) }
    }

    #[target_feature(enable = "avx512f")]
    fn silu_mul16_avx512(g: &[f32; 16], u: &[f32; 16], out: &mut [f32; 16]) {
        // SAFETY: `g` holds 16 floats.
        let gv = unsafe { _mm512_loadu_ps(g.as_ptr()) };
        let neg = _mm512_castsi512_ps(_mm512_xor_si512(
            _mm512_castps_si512(gv),
            _mm512_set1_epi32(i32::MIN),
        ));
        match exp16v(neg) {
            Some(e) => {
                let silu = _mm512_div_ps(gv, _mm512_add_ps(_mm512_set1_ps(1.0), e));
                // SAFETY: `u` and `out` hold 16 floats.
                unsafe {
                    _mm512_storeu_ps(
                        out.as_mut_ptr(),
                        _mm512_mul_ps(silu, _mm512_loadu_ps(u.as_ptr())),
                    )
                };
            }
            None => {
                for i in 0..16 {
                    out[i] = super::silu_scalar(g[i]) * u[i];
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::testing::skip;

    /// Every 97th float pattern of `(−88, 88)` and around the kernel's edges (both signs),
    /// plus the values the scalar path takes (|x| ≥ 88, ±∞, NaN).
    fn inputs() -> Vec<f32> {
        let mut xs: Vec<f32> = (0..LIMIT_BITS)
            .step_by(97)
            .chain(LIMIT_BITS - 40..LIMIT_BITS + 40)
            .chain([0x42c8_0000, 0x42d0_0000, 0x7f80_0000, 0x7fc0_0000])
            .map(f32::from_bits)
            .collect();
        let neg: Vec<f32> = xs.iter().map(|x| -x).collect();
        xs.extend(neg);
        xs
    }

    #[test]
    fn exp_has_the_bits_of_the_c_library() {
        if cpu_has_kernel().is_none() {
            skip(
                "kernels::silu::tests::exp_has_the_bits_of_the_c_library",
                "CPU has no AVX-512 F",
            );
            return;
        }
        let xs = inputs();
        let mut got = vec![0f32; xs.len()];
        exp_slice(&xs, &mut got);
        let bad: Vec<(f32, f32, f32)> = xs
            .iter()
            .zip(&got)
            .filter(|(x, g)| x.exp().to_bits() != g.to_bits())
            .map(|(x, g)| (*x, *g, x.exp()))
            .take(5)
            .collect();
        assert!(
            bad.is_empty(),
            "{} inputs, first differences (x, kernel, f32::exp): {bad:?}",
            xs.len()
        );
        assert!(agrees_with_libm());
    }

    /// All 2.2 billion floats of `(−88, 88)` (about 4 s on two cores in release; the
    /// sampled test above misses a kernel whose `r` is rounded once more, this one does not).
    #[test]
    fn exp_has_the_bits_of_the_c_library_on_every_float() {
        if cpu_has_kernel().is_none() {
            skip(
                "kernels::silu::tests::exp_has_the_bits_of_the_c_library_on_every_float",
                "CPU has no AVX-512 F",
            );
            return;
        }
        use rayon::prelude::*;
        // An unoptimised build takes every 61st pattern (all of them would take minutes).
        let step = if cfg!(debug_assertions) { 61 } else { 1 };
        let bad: usize = (0..LIMIT_BITS / 4096)
            .into_par_iter()
            .map(|block| {
                let xs: Vec<f32> = (block * 4096..(block + 1) * 4096)
                    .step_by(step)
                    .flat_map(|b| [f32::from_bits(b), -f32::from_bits(b)])
                    .collect();
                let mut got = vec![0f32; xs.len()];
                exp_slice(&xs, &mut got);
                xs.iter()
                    .zip(&got)
                    .filter(|(x, g)| x.exp().to_bits() != g.to_bits())
                    .count()
            })
            .sum();
        assert_eq!(bad, 0);
    }

    #[test]
    fn silu_times_up_equals_candle_to_the_bit() -> candle_core::Result<()> {
        if !available() {
            skip(
                "kernels::silu::tests::silu_times_up_equals_candle_to_the_bit",
                "CPU has no AVX-512 F, this C library's expf is another, or \
                 WORKBENCH_LLM_NO_SILU is set",
            );
            return Ok(());
        }
        // Gates over the whole range (and beyond ±88), odd length for the scalar tail.
        let xs = inputs();
        let n = xs.len() / 2 * 2 + 1;
        let g: Vec<f32> = (0..n).map(|i| xs[(i * 7919) % xs.len()] * 0.5).collect();
        let u: Vec<f32> = (0..n).map(|i| ((i % 13) as f32 - 6.0) * 0.37).collect();
        let g = Tensor::from_vec(g, (1, n), &Device::Cpu)?;
        let u = Tensor::from_vec(u, (1, n), &Device::Cpu)?;
        let fast = silu_mul(&g, &u)?.expect("kernel applies");
        let slow = (g.silu()? * &u)?;
        let (f, s) = (
            fast.flatten_all()?.to_vec1::<f32>()?,
            slow.flatten_all()?.to_vec1::<f32>()?,
        );
        let differ = f
            .iter()
            .zip(&s)
            .filter(|(a, b)| a.to_bits() != b.to_bits() && !(a.is_nan() && b.is_nan()))
            .count();
        assert_eq!(
            differ, 0,
            "{differ} of {n} outputs differ from g.silu() * u"
        );
        // A non-contiguous input is left to candle.
        let t = Tensor::from_vec(vec![1f32; 6], (2, 3), &Device::Cpu)?.t()?;
        assert!(silu_mul(&t, &t)?.is_none());
        Ok(())
    }
}
