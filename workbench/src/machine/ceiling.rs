//! Ceilings of the machine: how fast its cores can multiply-add at best, measured.
//!
//! A prefill (a prompt's tokens through a model's weight matrices) is compute-bound: its
//! ceiling is the CPU's peak multiply-add rate over the multiply-adds a token needs. That
//! peak is measured here, not taken from a data sheet: [`measure_peak`] runs, on each of
//! `threads` threads, a loop of independent multiply-add instructions (twelve accumulators,
//! no loads or stores) with the widest kernel the CPU executes, and reports the rate.
//!
//! | kernel | instruction | multiply-adds per instruction |
//! |---|---|---|
//! | `amx-int8` | `tdpbssd` (16 × 16 i32 += 16 × 64 i8 · 64 × 16 i8; four tiles) | 16,384 |
//! | `amx-bf16` | `tdpbf16ps` (16 × 16 f32 += 16 × 32 bf16 · 32 × 16 bf16) | 8,192 |
//! | `avx512-vnni` | `vpdpbusd zmm` (u8 × i8 → i32) | 64 |
//! | `avx512-bf16` | `vdpbf16ps zmm` (bf16 pairs → f32) | 32 |
//! | `avx-vnni` | `vpdpbusd ymm` (VEX) | 32 |
//! | `avx2` | `vpmaddubsw` + `vpmaddwd` + `vpaddd` (what AVX2 int8 dot products do) | 32 per 3 |
//! | `avx512f` (f32) | `vfmadd231ps zmm` | 16 |
//! | `avx2-fma` (f32) | `vfmadd231ps ymm` | 8 |
//!
//! [`measure_peak`] measures the widest int8 and f32 kernel; [`measure_kernels`] measures
//! every family this CPU runs, so that a system can be held to the ceiling of the path it
//! actually takes (a bf16 AMX prefill against `amx-bf16`, an AVX-512 VNNI one against
//! `avx512-vnni`).
//!
//! A real kernel also loads, unpacks quantised blocks and scales, so it reaches a fraction
//! of these rates; the ratio says how much is left.

use serde::{Deserialize, Serialize};
use std::time::Instant;

/// Measured peak multiply-add rates of this CPU with `threads` threads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ComputePeak {
    /// Threads run at once, one loop each.
    pub threads: usize,
    /// The int8 kernel measured (`amx-int8`, `avx512-vnni`, `avx-vnni`, `avx2`; `none`
    /// elsewhere).
    pub int8_kernel: String,
    /// int8 multiply-adds per second, all threads (0 when no kernel ran).
    pub int8_macs_per_s: f64,
    /// The f32 kernel measured (`avx512f`, `avx2-fma`; `none` elsewhere).
    pub f32_kernel: String,
    /// f32 fused multiply-adds per second, all threads (0 when no kernel ran).
    pub f32_fmas_per_s: f64,
}

/// One kernel family's measured peak ([`measure_kernels`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelPeak {
    /// The family, as in the module's table (`amx-int8`, `amx-bf16`, `avx512-vnni`,
    /// `avx512-bf16`, `avx-vnni`, `avx2`, `avx512f`, `avx2-fma`).
    pub kernel: String,
    /// The multiply-add's input type: `int8`, `bf16` or `f32`.
    pub input: String,
    /// The instruction timed.
    pub instruction: String,
    /// Multiply-adds one instruction does (`avx2`: the 32 of its three instructions).
    pub macs_per_instruction: usize,
    /// Threads run at once, one loop each.
    pub threads: usize,
    /// Multiply-adds per second, all threads; `None` when this CPU does not run the kernel
    /// (or, for AMX, the operating system does not let this process use tile data).
    pub macs_per_s: Option<f64>,
}

/// Every kernel family of the module's table, measured with `threads` threads where this
/// CPU runs it (best of 3 runs of about 0.1 s each), in the table's order.
pub fn measure_kernels(threads: usize) -> Vec<KernelPeak> {
    let threads = threads.max(1);
    families()
        .into_iter()
        .map(|f| KernelPeak {
            kernel: f.name.into(),
            input: f.input.into(),
            instruction: f.instruction.into(),
            macs_per_instruction: f.macs_per_instruction,
            threads,
            macs_per_s: f.kernel.map(|k| best_rate(threads, k, f.macs_per_iter)),
        })
        .collect()
}

/// A kernel family: what it is, and its loop when this CPU runs it.
struct Family {
    name: &'static str,
    input: &'static str,
    instruction: &'static str,
    macs_per_instruction: usize,
    kernel: Option<Kernel>,
    macs_per_iter: usize,
}

#[cfg(target_arch = "x86_64")]
fn families() -> Vec<Family> {
    let has = |f: bool, k: Kernel| f.then_some(k);
    let avx512 = is_x86_feature_detected!("avx512f");
    vec![
        Family {
            name: "amx-int8",
            input: "int8",
            instruction: "tdpbssd",
            macs_per_instruction: 16 * 16 * 64,
            kernel: has(amx_int8_usable(), x86::amx_safe),
            macs_per_iter: 4 * 16 * 16 * 64,
        },
        Family {
            name: "amx-bf16",
            input: "bf16",
            instruction: "tdpbf16ps",
            macs_per_instruction: 16 * 16 * 32,
            kernel: has(amx_bf16_usable(), x86::amx_bf16_safe),
            macs_per_iter: 4 * 16 * 16 * 32,
        },
        Family {
            name: "avx512-vnni",
            input: "int8",
            instruction: "vpdpbusd zmm",
            macs_per_instruction: 64,
            kernel: has(
                avx512 && is_x86_feature_detected!("avx512vnni"),
                x86::vnni512_safe,
            ),
            macs_per_iter: ACC * 64,
        },
        Family {
            name: "avx512-bf16",
            input: "bf16",
            instruction: "vdpbf16ps zmm",
            macs_per_instruction: 32,
            kernel: has(
                avx512 && is_x86_feature_detected!("avx512bf16"),
                x86::bf16_512_safe,
            ),
            macs_per_iter: ACC * 32,
        },
        Family {
            name: "avx-vnni",
            input: "int8",
            instruction: "vpdpbusd ymm (VEX)",
            macs_per_instruction: 32,
            kernel: has(is_x86_feature_detected!("avxvnni"), x86::vnni256_safe),
            macs_per_iter: ACC * 32,
        },
        Family {
            name: "avx2",
            input: "int8",
            instruction: "vpmaddubsw + vpmaddwd + vpaddd",
            macs_per_instruction: 32,
            kernel: has(is_x86_feature_detected!("avx2"), x86::maddubs_safe),
            macs_per_iter: ACC * 32,
        },
        Family {
            name: "avx512f",
            input: "f32",
            instruction: "vfmadd231ps zmm",
            macs_per_instruction: 16,
            kernel: has(avx512, x86::fma512_safe),
            macs_per_iter: ACC * 16,
        },
        Family {
            name: "avx2-fma",
            input: "f32",
            instruction: "vfmadd231ps ymm",
            macs_per_instruction: 8,
            kernel: has(
                is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma"),
                x86::fma256_safe,
            ),
            macs_per_iter: ACC * 8,
        },
    ]
}

#[cfg(not(target_arch = "x86_64"))]
fn families() -> Vec<Family> {
    Vec::new()
}

/// Independent accumulators per loop (enough to cover the multiply-add latency).
const ACC: usize = 12;

/// Measure the peak rates with `threads` threads (best of 3 runs of about 0.1 s each).
pub fn measure_peak(threads: usize) -> ComputePeak {
    let threads = threads.max(1);
    let (int8_kernel, int8) = match int8_kernel() {
        Some((name, f, macs)) => (name, best_rate(threads, f, macs)),
        None => ("none", 0.0),
    };
    let (f32_kernel, f32) = match f32_kernel() {
        Some((name, f, macs)) => (name, best_rate(threads, f, macs)),
        None => ("none", 0.0),
    };
    ComputePeak {
        threads,
        int8_kernel: int8_kernel.into(),
        int8_macs_per_s: int8,
        f32_kernel: f32_kernel.into(),
        f32_fmas_per_s: f32,
    }
}

/// A kernel: runs `iters` iterations, returns a value that depends on every one.
type Kernel = fn(usize) -> f64;

/// Multiply-adds per second of `kernel` on `threads` threads at once: each runs
/// `iters` iterations of `macs_per_iter`; best of three timings.
fn best_rate(threads: usize, kernel: Kernel, macs_per_iter: usize) -> f64 {
    // Calibrate to about 0.1 s on one thread.
    let mut iters = 1 << 16;
    loop {
        let t = Instant::now();
        std::hint::black_box(kernel(iters));
        if t.elapsed().as_secs_f64() > 0.02 || iters >= 1 << 30 {
            let per = t.elapsed().as_secs_f64() / iters as f64;
            iters = ((0.1 / per.max(1e-12)) as usize).clamp(1 << 16, 1 << 31);
            break;
        }
        iters *= 4;
    }
    let mut best = f64::INFINITY;
    for _ in 0..3 {
        let t = Instant::now();
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(move || std::hint::black_box(kernel(iters)));
            }
        });
        best = best.min(t.elapsed().as_secs_f64());
    }
    (threads * iters * macs_per_iter) as f64 / best
}

/// Whether the CPU runs AMX-INT8 and the operating system lets this process use AMX tile
/// data (Linux hands it out on request: `arch_prctl(ARCH_REQ_XCOMP_PERM, XTILEDATA)`, made
/// once here).
pub fn amx_int8_usable() -> bool {
    amx_features() & AMX_INT8 != 0
}

/// Whether the CPU runs AMX-BF16 and this process may use AMX tile data (as
/// [`amx_int8_usable`]).
pub fn amx_bf16_usable() -> bool {
    amx_features() & AMX_BF16 != 0
}

/// CPUID leaf 7 EDX bits (the std macro's names for them are not stable yet).
const AMX_BF16: u32 = 1 << 22;
const AMX_TILE: u32 = 1 << 24;
const AMX_INT8: u32 = 1 << 25;

/// The AMX bits of CPUID leaf 7 EDX when the CPU has AMX tiles and the tile-data request
/// succeeded, else 0.
fn amx_features() -> u32 {
    static FEATURES: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *FEATURES.get_or_init(amx_request)
}

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
fn amx_request() -> u32 {
    // SAFETY: CPUID is present on every x86-64 CPU; leaf 7 is read only when the CPU
    // reports it (a leaf above the maximum returns another leaf's data).
    #[allow(unused_unsafe)]
    let max_leaf = unsafe { std::arch::x86_64::__get_cpuid_max(0) }.0;
    if max_leaf < 7 {
        return 0;
    }
    #[allow(unused_unsafe)]
    // SAFETY: as above; leaf 7 exists.
    let edx = unsafe { std::arch::x86_64::__cpuid_count(7, 0) }.edx;
    if edx & AMX_TILE == 0 {
        return 0;
    }
    const ARCH_REQ_XCOMP_PERM: libc::c_long = 0x1023;
    const XFEATURE_XTILEDATA: libc::c_long = 18;
    // SAFETY: a plain system call with integer arguments.
    let granted = unsafe {
        libc::syscall(
            libc::SYS_arch_prctl,
            ARCH_REQ_XCOMP_PERM,
            XFEATURE_XTILEDATA,
        ) == 0
    };
    if granted {
        edx & (AMX_TILE | AMX_INT8 | AMX_BF16)
    } else {
        0
    }
}

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
fn amx_request() -> u32 {
    0
}

#[cfg(target_arch = "x86_64")]
fn int8_kernel() -> Option<(&'static str, Kernel, usize)> {
    if amx_int8_usable() {
        Some(("amx-int8", x86::amx_safe, 4 * 16 * 16 * 64))
    } else if is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512vnni") {
        Some(("avx512-vnni", x86::vnni512_safe, ACC * 64))
    } else if is_x86_feature_detected!("avxvnni") {
        Some(("avx-vnni", x86::vnni256_safe, ACC * 32))
    } else if is_x86_feature_detected!("avx2") {
        Some(("avx2", x86::maddubs_safe, ACC * 32))
    } else {
        None
    }
}

#[cfg(target_arch = "x86_64")]
fn f32_kernel() -> Option<(&'static str, Kernel, usize)> {
    if is_x86_feature_detected!("avx512f") {
        Some(("avx512f", x86::fma512_safe, ACC * 16))
    } else if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
        Some(("avx2-fma", x86::fma256_safe, ACC * 8))
    } else {
        None
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn int8_kernel() -> Option<(&'static str, Kernel, usize)> {
    None
}

#[cfg(not(target_arch = "x86_64"))]
fn f32_kernel() -> Option<(&'static str, Kernel, usize)> {
    None
}

/// AMX tile configuration for kernels that use all eight tiles as 16 lines of 64 bytes
/// (this module's peak loop and the prefill kernel). A thread keeps one configuration, and
/// candle's own AMX kernel configures a thread once and expects it to stay, so
/// [`tiles::configure`] returns the previous one for [`tiles::restore`].
#[cfg(target_arch = "x86_64")]
pub(crate) mod tiles {
    /// The 64-byte `ldtilecfg` / `sttilecfg` operand.
    #[repr(C, align(64))]
    pub(crate) struct TileCfg {
        palette: u8,
        start_row: u8,
        _reserved: [u8; 14],
        colsb: [u16; 16],
        rows: [u8; 16],
    }

    /// Tiles 0–7 as 16 lines of 64 bytes.
    static FULL: TileCfg = TileCfg {
        palette: 1,
        start_row: 0,
        _reserved: [0; 14],
        colsb: [64, 64, 64, 64, 64, 64, 64, 64, 0, 0, 0, 0, 0, 0, 0, 0],
        rows: [16, 16, 16, 16, 16, 16, 16, 16, 0, 0, 0, 0, 0, 0, 0, 0],
    };

    /// Configures this thread's tiles 0–7 as 16 lines of 64 bytes and returns its previous
    /// configuration.
    ///
    /// # Safety
    /// The CPU has AMX and this process may use tile data ([`super::amx_int8_usable`] or
    /// [`super::amx_bf16_usable`]).
    pub(crate) unsafe fn configure() -> TileCfg {
        let mut saved = TileCfg {
            palette: 0,
            start_row: 0,
            _reserved: [0; 14],
            colsb: [0; 16],
            rows: [0; 16],
        };
        core::arch::asm!("sttilecfg [{}]", in(reg) &mut saved, options(nostack));
        core::arch::asm!("ldtilecfg [{}]", in(reg) &FULL, options(nostack, readonly));
        saved
    }

    /// Puts back a configuration saved by [`configure`] (none: releases the tiles).
    ///
    /// # Safety
    /// As [`configure`].
    pub(crate) unsafe fn restore(saved: &TileCfg) {
        if saved.palette == 0 {
            core::arch::asm!("tilerelease", options(nostack, nomem));
        } else {
            core::arch::asm!("ldtilecfg [{}]", in(reg) saved, options(nostack, readonly));
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    //! The loops. Each `*_safe` wrapper is only handed out by `int8_kernel` / `f32_kernel`
    //! after the CPU feature it needs was detected at run time.
    use super::ACC;
    use std::arch::x86_64::*;

    #[target_feature(enable = "avx512f,avx512vnni")]
    unsafe fn vnni512(iters: usize) -> f64 {
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
    unsafe fn vnni256(iters: usize) -> f64 {
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
    unsafe fn lanes_sum(acc: [__m256i; ACC]) -> f64 {
        let mut out = [0i32; 8];
        let mut total = 0f64;
        for x in acc {
            _mm256_storeu_si256(out.as_mut_ptr().cast(), x);
            total += out.iter().map(|&v| v as f64).sum::<f64>();
        }
        total
    }

    #[target_feature(enable = "avx2")]
    unsafe fn maddubs(iters: usize) -> f64 {
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
    unsafe fn fma512(iters: usize) -> f64 {
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
    unsafe fn fma256(iters: usize) -> f64 {
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
        _mm256_storeu_ps(out.as_mut_ptr(), s);
        out.iter().map(|&v| v as f64).sum()
    }

    /// Four independent `tdpbssd` per iteration (tiles 0–3 accumulate tiles 4, 5 times 6,
    /// 7, all 16 lines of 64 bytes). The thread's tile configuration is saved and put back.
    unsafe fn amx(iters: usize) -> f64 {
        let saved = super::tiles::configure();
        let ones = [1i8; 1024];
        let mut out = [0i32; 256];
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
        );
        for _ in 0..iters {
            core::arch::asm!(
                "tdpbssd tmm0, tmm4, tmm6",
                "tdpbssd tmm1, tmm4, tmm7",
                "tdpbssd tmm2, tmm5, tmm6",
                "tdpbssd tmm3, tmm5, tmm7",
                options(nostack, nomem)
            );
        }
        core::arch::asm!(
            "tilestored [{o} + {s}*1], tmm0",
            o = in(reg) out.as_mut_ptr(),
            s = in(reg) 64usize,
            options(nostack)
        );
        super::tiles::restore(&saved);
        out[0] as f64
    }

    #[target_feature(enable = "avx512f,avx512bf16")]
    unsafe fn bf16_512(iters: usize) -> f64 {
        // bf16 1.0 in every lane of both operands.
        let one: __m512bh = std::mem::transmute(_mm512_set1_epi16(0x3F80));
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
    unsafe fn amx_bf16(iters: usize) -> f64 {
        let saved = super::tiles::configure();
        let ones = [0x3F80u16; 512];
        let mut out = [0f32; 256];
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
        );
        for _ in 0..iters {
            core::arch::asm!(
                "tdpbf16ps tmm0, tmm4, tmm6",
                "tdpbf16ps tmm1, tmm4, tmm7",
                "tdpbf16ps tmm2, tmm5, tmm6",
                "tdpbf16ps tmm3, tmm5, tmm7",
                options(nostack, nomem)
            );
        }
        core::arch::asm!(
            "tilestored [{o} + {s}*1], tmm0",
            o = in(reg) out.as_mut_ptr(),
            s = in(reg) 64usize,
            options(nostack)
        );
        super::tiles::restore(&saved);
        out[0] as f64
    }

    pub(super) fn amx_bf16_safe(iters: usize) -> f64 {
        // SAFETY: handed out only when `amx_bf16_usable()` (CPU and tile-data permission).
        unsafe { amx_bf16(iters) }
    }
    pub(super) fn bf16_512_safe(iters: usize) -> f64 {
        // SAFETY: handed out only when avx512f and avx512bf16 were detected.
        unsafe { bf16_512(iters) }
    }
    pub(super) fn amx_safe(iters: usize) -> f64 {
        // SAFETY: handed out only when `amx_int8_usable()` (CPU and tile-data permission).
        unsafe { amx(iters) }
    }
    pub(super) fn vnni512_safe(iters: usize) -> f64 {
        // SAFETY: handed out only when avx512f and avx512vnni were detected.
        unsafe { vnni512(iters) }
    }
    pub(super) fn vnni256_safe(iters: usize) -> f64 {
        // SAFETY: handed out only when avxvnni was detected.
        unsafe { vnni256(iters) }
    }
    pub(super) fn maddubs_safe(iters: usize) -> f64 {
        // SAFETY: handed out only when avx2 was detected.
        unsafe { maddubs(iters) }
    }
    pub(super) fn fma512_safe(iters: usize) -> f64 {
        // SAFETY: handed out only when avx512f was detected.
        unsafe { fma512(iters) }
    }
    pub(super) fn fma256_safe(iters: usize) -> f64 {
        // SAFETY: handed out only when avx2 and fma were detected.
        unsafe { fma256(iters) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_is_listed_and_measured_where_the_cpu_runs_it() {
        // Other tests run beside this one, and sharing a core only ever lowers a measured
        // rate: the ratio checks below use each kernel's best over up to four measurements,
        // measuring again only while a check fails.
        let mut all = measure_kernels(1);
        for _ in 0..3 {
            if ratio_checks(&all).is_ok() {
                break;
            }
            for (k, again) in all.iter_mut().zip(measure_kernels(1)) {
                k.macs_per_s = match (k.macs_per_s, again.macs_per_s) {
                    (Some(a), Some(b)) => Some(a.max(b)),
                    (a, b) => a.or(b),
                };
            }
        }
        let names: Vec<&str> = all.iter().map(|k| k.kernel.as_str()).collect();
        if cfg!(target_arch = "x86_64") {
            assert_eq!(
                names,
                [
                    "amx-int8",
                    "amx-bf16",
                    "avx512-vnni",
                    "avx512-bf16",
                    "avx-vnni",
                    "avx2",
                    "avx512f",
                    "avx2-fma"
                ]
            );
        }
        for k in &all {
            if let Some(r) = k.macs_per_s {
                assert!(r > 1e8, "{k:?}");
            }
        }
        if let Err(e) = ratio_checks(&all) {
            panic!("{e}: {all:?}");
        }
        // The same widest kernels as measure_peak, at about its rate (its best of up to four
        // measurements too).
        let mut peak = measure_peak(1);
        for _ in 0..3 {
            let near = rate(&all, &peak.f32_kernel)
                .is_none_or(|r| r > 0.5 * peak.f32_fmas_per_s && r < 2.0 * peak.f32_fmas_per_s);
            if near {
                break;
            }
            let again = measure_peak(1);
            peak.f32_fmas_per_s = peak.f32_fmas_per_s.max(again.f32_fmas_per_s);
        }
        if let Some(r) = rate(&all, &peak.f32_kernel) {
            assert!(
                r > 0.5 * peak.f32_fmas_per_s && r < 2.0 * peak.f32_fmas_per_s,
                "{all:?} {peak:?}"
            );
        }
        let json = serde_json::to_string(&all).unwrap();
        let back: Vec<KernelPeak> = serde_json::from_str(&json).unwrap();
        assert_eq!(back.len(), all.len());
    }

    fn rate(all: &[KernelPeak], name: &str) -> Option<f64> {
        all.iter()
            .find(|k| k.kernel == name)
            .and_then(|k| k.macs_per_s)
    }

    /// The rates against each other, as the instructions' widths allow: a wrong count of
    /// multiply-adds per instruction moves a ratio out of its bounds.
    fn ratio_checks(all: &[KernelPeak]) -> std::result::Result<(), String> {
        let rate = |name: &str| rate(all, name);
        let check = |ok: bool, what: &str| if ok { Ok(()) } else { Err(what.to_string()) };
        // Per instruction, VNNI does 4× and bf16 dot products 2× the multiply-adds of an f32
        // FMA of the same width; CPUs issue them at up to half the FMA's rate (Sapphire
        // Rapids: one port against two), so the rates stay within these bounds.
        // (Loose bounds: the two rates are measured one after the other, while other tests
        // may run.)
        if let (Some(v), Some(f)) = (rate("avx512-vnni"), rate("avx512f")) {
            check(v > 1.2 * f && v < 6.0 * f, "avx512-vnni / avx512f")?;
        }
        if let (Some(b), Some(f)) = (rate("avx512-bf16"), rate("avx512f")) {
            check(b > 0.4 * f && b < 3.0 * f, "avx512-bf16 / avx512f")?;
        }
        // Two multiplying instructions per 32 multiply-adds on 256 bits: at most the rate
        // of 256-bit VNNI, which does them in one.
        if let (Some(a), Some(v)) = (rate("avx2"), rate("avx-vnni").or(rate("avx512-vnni"))) {
            check(a < 1.5 * v, "avx2 / vnni")?;
        }
        if let (Some(i), Some(b)) = (rate("amx-int8"), rate("amx-bf16")) {
            check(i > 1.3 * b, "amx-int8 / amx-bf16")?;
        }
        Ok(())
    }

    #[test]
    fn peak_rates_are_positive_where_a_kernel_ran_and_round_trip_through_json() {
        let one = measure_peak(1);
        if one.int8_kernel != "none" {
            assert!(one.int8_macs_per_s > 1e9, "{one:?}");
        }
        if one.f32_kernel != "none" {
            assert!(one.f32_fmas_per_s > 1e8, "{one:?}");
            // int8 kernels do at least as many multiply-adds per instruction as f32 ones.
            assert!(one.int8_macs_per_s > one.f32_fmas_per_s, "{one:?}");
        }
        // serde_json's default float parsing may differ from the original in the last bit.
        let json = serde_json::to_string(&one).unwrap();
        let back: ComputePeak = serde_json::from_str(&json).unwrap();
        assert_eq!(
            (back.threads, &back.int8_kernel, &back.f32_kernel),
            (one.threads, &one.int8_kernel, &one.f32_kernel)
        );
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 * a.abs().max(1.0);
        assert!(close(back.int8_macs_per_s, one.int8_macs_per_s), "{back:?}");
        assert!(close(back.f32_fmas_per_s, one.f32_fmas_per_s), "{back:?}");
    }
}
