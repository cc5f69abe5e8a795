//! The peak multiply-add loops that `machine::ceiling` times: per kernel family, a loop of
//! independent multiply-add instructions (twelve accumulators, no loads or stores in the
//! loop) on constant operands. Each loop is handed out as a plain function pointer
//! ([`Loop`]) only for the token of the features it runs on, so calling it is safe.
//!
//! The loops return a value that depends on every iteration; the tests compare it with the
//! same arithmetic done in plain Rust (the portable path).

use super::cpu::{
    features, AmxBf16, AmxInt8, AmxTiles, Avx2, Avx2Fma, Avx512, Avx512Bf16, Avx512Vnni, AvxVnni,
};
use std::arch::x86_64::*;

/// Independent accumulators per loop (enough to cover the multiply-add latency).
pub const ACC: usize = 12;

/// A loop: runs `iters` iterations, returns a value that depends on every one.
pub type Loop = fn(usize) -> f64;

/// `tdpbssd` (AMX-INT8): four per iteration, 16,384 multiply-adds each.
pub fn amx_int8(_: AmxInt8) -> Loop {
    |iters| {
        amx(
            features().amx_int8().expect("handed out for the token"),
            iters,
        )
    }
}

/// `tdpbf16ps` (AMX-BF16): four per iteration, 8,192 multiply-adds each.
pub fn amx_bf16(_: AmxBf16) -> Loop {
    |iters| {
        amx_bf16_loop(
            features().amx_bf16().expect("handed out for the token"),
            iters,
        )
    }
}

/// `vpdpbusd zmm` (AVX-512 VNNI): `ACC` per iteration, 64 multiply-adds each.
pub fn vnni512(_: Avx512Vnni) -> Loop {
    // SAFETY: handed out only for the token (AVX-512 F and VNNI).
    |iters| unsafe { vnni512_loop(iters) }
}

/// `vdpbf16ps zmm` (AVX-512 BF16): `ACC` per iteration, 32 multiply-adds each.
pub fn bf16_512(_: Avx512Bf16) -> Loop {
    // SAFETY: handed out only for the token (AVX-512 F and BF16).
    |iters| unsafe { bf16_512_loop(iters) }
}

/// `vpdpbusd ymm` (AVX-VNNI): `ACC` per iteration, 32 multiply-adds each.
pub fn vnni256(_: AvxVnni) -> Loop {
    // SAFETY: handed out only for the token (AVX-VNNI).
    |iters| unsafe { vnni256_loop(iters) }
}

/// `vpmaddubsw` + `vpmaddwd` + `vpaddd` (AVX2): `ACC` per iteration, 32 multiply-adds each.
pub fn maddubs(_: Avx2) -> Loop {
    // SAFETY: handed out only for the token (AVX2).
    |iters| unsafe { maddubs_loop(iters) }
}

/// `vfmadd231ps zmm` (AVX-512 F): `ACC` per iteration, 16 multiply-adds each.
pub fn fma512(_: Avx512) -> Loop {
    // SAFETY: handed out only for the token (AVX-512 F).
    |iters| unsafe { fma512_loop(iters) }
}

/// `vfmadd231ps ymm` (AVX2 + FMA): `ACC` per iteration, 8 multiply-adds each.
pub fn fma256(_: Avx2Fma) -> Loop {
    // SAFETY: handed out only for the token (AVX2 and FMA).
    |iters| unsafe { fma256_loop(iters) }
}

#[target_feature(enable = "avx512f,avx512vnni")]
fn vnni512_loop(iters: usize) -> f64 {
    let a = _mm512_set1_epi8(3);
    let b = _mm512_set1_epi8(-2);
    let mut acc = [_mm512_setzero_si512(); ACC];
    for _ in 0..iters {
        for x in acc.iter_mut() {
            *x = _mm512_dpbusd_epi32(*x, a, b);
        }
    }
    let mut s = _mm512_setzero_si512();
    for x in acc {
        s = _mm512_add_epi32(s, x);
    }
    _mm512_reduce_add_epi32(s) as f64
}

#[target_feature(enable = "avxvnni")]
fn vnni256_loop(iters: usize) -> f64 {
    let a = _mm256_set1_epi8(3);
    let b = _mm256_set1_epi8(-2);
    let mut acc = [_mm256_setzero_si256(); ACC];
    for _ in 0..iters {
        for x in acc.iter_mut() {
            *x = _mm256_dpbusd_avx_epi32(*x, a, b);
        }
    }
    lanes_sum(acc)
}

/// The sum of every lane of every accumulator, so that no lane's work can be dropped.
#[target_feature(enable = "avx2")]
fn lanes_sum(acc: [__m256i; ACC]) -> f64 {
    let mut out = [0i32; 8];
    let mut total = 0f64;
    for x in acc {
        // SAFETY: `out` holds eight i32, 256 bits.
        unsafe { _mm256_storeu_si256(out.as_mut_ptr().cast(), x) };
        total += out.iter().map(|&v| v as f64).sum::<f64>();
    }
    total
}

#[target_feature(enable = "avx2")]
fn maddubs_loop(iters: usize) -> f64 {
    let b = _mm256_set1_epi8(-2);
    let ones = _mm256_set1_epi16(1);
    // Each accumulator is also the next product's u8 operand: with constant operands
    // the compiler would hoist the products out of the loop and time additions only.
    let mut acc: [__m256i; ACC] = std::array::from_fn(|i| _mm256_set1_epi8(i as i8 + 1));
    for _ in 0..iters {
        for x in acc.iter_mut() {
            let p = _mm256_maddubs_epi16(*x, b);
            *x = _mm256_add_epi32(*x, _mm256_madd_epi16(p, ones));
        }
    }
    lanes_sum(acc)
}

#[target_feature(enable = "avx512f")]
fn fma512_loop(iters: usize) -> f64 {
    let a = _mm512_set1_ps(1.000_000_1);
    let b = _mm512_set1_ps(0.999_999_9);
    let mut acc = [_mm512_setzero_ps(); ACC];
    for _ in 0..iters {
        for x in acc.iter_mut() {
            *x = _mm512_fmadd_ps(*x, a, b);
        }
    }
    let mut s = _mm512_setzero_ps();
    for x in acc {
        s = _mm512_add_ps(s, x);
    }
    _mm512_reduce_add_ps(s) as f64
}

#[target_feature(enable = "avx2,fma")]
fn fma256_loop(iters: usize) -> f64 {
    let a = _mm256_set1_ps(1.000_000_1);
    let b = _mm256_set1_ps(0.999_999_9);
    let mut acc = [_mm256_setzero_ps(); ACC];
    for _ in 0..iters {
        for x in acc.iter_mut() {
            *x = _mm256_fmadd_ps(*x, a, b);
        }
    }
    let mut s = _mm256_setzero_ps();
    for x in acc {
        s = _mm256_add_ps(s, x);
    }
    let mut out = [0f32; 8];
    // SAFETY: `out` holds eight f32, 256 bits.
    unsafe { _mm256_storeu_ps(out.as_mut_ptr(), s) };
    out.iter().map(|&v| v as f64).sum()
}

/// Four independent `tdpbssd` per iteration (tiles 0–3 accumulate tiles 4, 5 times 6,
/// 7, all 16 lines of 64 bytes). The thread's tile configuration is saved and put back.
fn amx(token: AmxInt8, iters: usize) -> f64 {
    let tiles = AmxTiles::from(token);
    // SAFETY: restored below, before this function returns.
    let saved = unsafe { super::tiles::configure(tiles) };
    let ones = [1i8; 1024];
    let mut out = [0i32; 256];
    // SAFETY: AMX (the token) with tiles 0–7 as 16 lines of 64 bytes (configured above);
    // the loads read `ones`, 1 KB in lines of 64 bytes.
    unsafe {
        core::arch::asm!(
            "tilezero tmm0",
            "tilezero tmm1",
            "tilezero tmm2",
            "tilezero tmm3",
            "tileloadd tmm4, [{p} + {s}*1]",
            "tileloadd tmm5, [{p} + {s}*1]",
            "tileloadd tmm6, [{p} + {s}*1]",
            "tileloadd tmm7, [{p} + {s}*1]",
            p = in(reg) ones.as_ptr(),
            s = in(reg) 64usize,
            options(nostack, readonly)
        )
    };
    for _ in 0..iters {
        // SAFETY: AMX (the token) on tiles 0–7 as configured above; no memory operand.
        unsafe {
            core::arch::asm!(
                "tdpbssd tmm0, tmm4, tmm6",
                "tdpbssd tmm1, tmm4, tmm7",
                "tdpbssd tmm2, tmm5, tmm6",
                "tdpbssd tmm3, tmm5, tmm7",
                options(nostack, nomem)
            )
        };
    }
    // SAFETY: tile 0 is 16 lines of 64 bytes, stored into `out` (1 KB, lines of 64 bytes).
    unsafe {
        core::arch::asm!(
            "tilestored [{o} + {s}*1], tmm0",
            o = in(reg) out.as_mut_ptr(),
            s = in(reg) 64usize,
            options(nostack)
        )
    };
    // SAFETY: the tiles' data is not used after this point.
    unsafe { super::tiles::restore(tiles, &saved) };
    out[0] as f64
}

#[target_feature(enable = "avx512f,avx512bf16")]
fn bf16_512_loop(iters: usize) -> f64 {
    // bf16 1.0 in every lane of both operands.
    // SAFETY: __m512bh and __m512i are both 512 bits of plain data.
    let one: __m512bh = unsafe { std::mem::transmute(_mm512_set1_epi16(0x3F80)) };
    let mut acc = [_mm512_setzero_ps(); ACC];
    for _ in 0..iters {
        for x in acc.iter_mut() {
            *x = _mm512_dpbf16_ps(*x, one, one);
        }
    }
    let mut s = _mm512_setzero_ps();
    for x in acc {
        s = _mm512_add_ps(s, x);
    }
    _mm512_reduce_add_ps(s) as f64
}

/// As [`amx`] with `tdpbf16ps` on bf16 1.0 (f32 accumulators).
fn amx_bf16_loop(token: AmxBf16, iters: usize) -> f64 {
    let tiles = AmxTiles::from(token);
    // SAFETY: restored below, before this function returns.
    let saved = unsafe { super::tiles::configure(tiles) };
    let ones = [0x3F80u16; 512];
    let mut out = [0f32; 256];
    // SAFETY: AMX (the token) with tiles 0–7 as 16 lines of 64 bytes (configured above);
    // the loads read `ones`, 1 KB in lines of 64 bytes.
    unsafe {
        core::arch::asm!(
            "tilezero tmm0",
            "tilezero tmm1",
            "tilezero tmm2",
            "tilezero tmm3",
            "tileloadd tmm4, [{p} + {s}*1]",
            "tileloadd tmm5, [{p} + {s}*1]",
            "tileloadd tmm6, [{p} + {s}*1]",
            "tileloadd tmm7, [{p} + {s}*1]",
            p = in(reg) ones.as_ptr(),
            s = in(reg) 64usize,
            options(nostack, readonly)
        )
    };
    for _ in 0..iters {
        // SAFETY: AMX (the token) on tiles 0–7 as configured above; no memory operand.
        unsafe {
            core::arch::asm!(
                "tdpbf16ps tmm0, tmm4, tmm6",
                "tdpbf16ps tmm1, tmm4, tmm7",
                "tdpbf16ps tmm2, tmm5, tmm6",
                "tdpbf16ps tmm3, tmm5, tmm7",
                options(nostack, nomem)
            )
        };
    }
    // SAFETY: tile 0 is 16 lines of 64 bytes, stored into `out` (1 KB, lines of 64 bytes).
    unsafe {
        core::arch::asm!(
            "tilestored [{o} + {s}*1], tmm0",
            o = in(reg) out.as_mut_ptr(),
            s = in(reg) 64usize,
            options(nostack)
        )
    };
    // SAFETY: the tiles' data is not used after this point.
    unsafe { super::tiles::restore(tiles, &saved) };
    out[0] as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::testing::skip;

    /// Iterations per check: small enough for exact integer and f32 sums.
    const ITERS: usize = 1000;

    /// Runs `check` with the loop when this CPU has its features, else prints the skip line.
    fn with<T>(test: &str, token: Option<T>, why: &str, check: impl FnOnce(T)) {
        match token {
            Some(t) => check(t),
            None => skip(test, why),
        }
    }

    fn close(got: f64, want: f64) -> bool {
        (got - want).abs() <= 1e-6 * want.abs().max(1.0)
    }

    #[test]
    fn vnni512_matches_scalar() {
        let f = features().avx512vnni();
        with(
            "kernels::peak::tests::vnni512_matches_scalar",
            f,
            "CPU has no AVX-512 VNNI",
            |t| {
                // Per lane and iteration: four u8 3 × i8 −2; 16 lanes in each of ACC vectors.
                let want = (-24 * ITERS as i64 * 16 * ACC as i64) as f64;
                assert_eq!(vnni512(t)(ITERS), want);
            },
        );
    }

    #[test]
    fn vnni256_matches_scalar() {
        let f = features().avxvnni();
        with(
            "kernels::peak::tests::vnni256_matches_scalar",
            f,
            "CPU has no AVX-VNNI",
            |t| {
                let want = (-24 * ITERS as i64 * 8 * ACC as i64) as f64;
                assert_eq!(vnni256(t)(ITERS), want);
            },
        );
    }

    #[test]
    fn maddubs_matches_scalar() {
        with(
            "kernels::peak::tests::maddubs_matches_scalar",
            features().avx2(),
            "CPU has no AVX2",
            |t| {
                // Each i32 lane of accumulator i starts as four bytes i + 1 and adds the
                // saturated i16 sums of its byte pairs (u8) times −2 (i8).
                let sat = |v: i32| v.clamp(i16::MIN as i32, i16::MAX as i32);
                let mut want = 0f64;
                for i in 0..ACC {
                    let mut x = i32::from_le_bytes([i as u8 + 1; 4]);
                    for _ in 0..ITERS {
                        let b = x.to_le_bytes();
                        let p0 = sat(b[0] as i32 * -2 + b[1] as i32 * -2);
                        let p1 = sat(b[2] as i32 * -2 + b[3] as i32 * -2);
                        x = x.wrapping_add(p0 + p1);
                    }
                    want += 8.0 * x as f64;
                }
                assert_eq!(maddubs(t)(ITERS), want);
            },
        );
    }

    /// The f32 loops' value: every lane iterates `x ← x·a + b` (fused), the accumulators
    /// are summed one after another, then the `lanes` lanes.
    fn fma_model(lanes: usize) -> f64 {
        let (a, b) = (1.000_000_1f32, 0.999_999_9f32);
        let mut x = 0f32;
        for _ in 0..ITERS {
            x = x.mul_add(a, b);
        }
        let mut s = 0f32;
        for _ in 0..ACC {
            s += x;
        }
        lanes as f64 * s as f64
    }

    #[test]
    fn fma512_matches_scalar() {
        with(
            "kernels::peak::tests::fma512_matches_scalar",
            features().avx512(),
            "CPU has no AVX-512 F",
            |t| {
                let (got, want) = (fma512(t)(ITERS), fma_model(16));
                assert!(close(got, want), "{got} vs {want}");
            },
        );
    }

    #[test]
    fn fma256_matches_scalar() {
        let f = features().avx2_fma();
        with(
            "kernels::peak::tests::fma256_matches_scalar",
            f,
            "CPU has no AVX2 and FMA",
            |t| {
                let (got, want) = (fma256(t)(ITERS), fma_model(8));
                assert!(close(got, want), "{got} vs {want}");
            },
        );
    }

    #[test]
    fn bf16_512_matches_scalar() {
        let f = features().avx512bf16();
        with(
            "kernels::peak::tests::bf16_512_matches_scalar",
            f,
            "CPU has no AVX-512 BF16",
            |t| {
                // Per lane and iteration: two bf16 products 1 × 1.
                let want = (2 * ITERS * 16 * ACC) as f64;
                assert_eq!(bf16_512(t)(ITERS), want);
            },
        );
    }

    #[test]
    fn amx_int8_matches_scalar() {
        let f = features().amx_int8();
        with(
            "kernels::peak::tests::amx_int8_matches_scalar",
            f,
            "CPU has no AMX-INT8 with tile data",
            |t| {
                // Element (0, 0) of tile 0: 64 products 1 × 1 per instruction.
                assert_eq!(amx_int8(t)(ITERS), (64 * ITERS) as f64);
            },
        );
    }

    #[test]
    fn amx_bf16_matches_scalar() {
        let f = features().amx_bf16();
        with(
            "kernels::peak::tests::amx_bf16_matches_scalar",
            f,
            "CPU has no AMX-BF16 with tile data",
            |t| {
                // Element (0, 0) of tile 0: 32 products 1.0 × 1.0 per instruction.
                assert_eq!(amx_bf16(t)(ITERS), (32 * ITERS) as f64);
            },
        );
    }
}
