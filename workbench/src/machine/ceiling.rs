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

use crate::kernels::cpu::features;
#[cfg(target_arch = "x86_64")]
use crate::kernels::peak::{self, ACC};
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
    /// The slowest of the same 3 runs (the spread under load); `None` where no kernel ran
    /// (and in records written before it was kept).
    #[serde(default)]
    pub slowest_macs_per_s: Option<f64>,
}

/// Every kernel family of the module's table, measured with `threads` threads where this
/// CPU runs it (best of 3 runs of about 0.1 s each, and the slowest of them), in the
/// table's order.
pub fn measure_kernels(threads: usize) -> Vec<KernelPeak> {
    let threads = threads.max(1);
    families()
        .into_iter()
        .map(|f| {
            let rates = f.kernel.map(|k| rates(threads, k, f.macs_per_iter));
            KernelPeak {
                kernel: f.name.into(),
                input: f.input.into(),
                instruction: f.instruction.into(),
                macs_per_instruction: f.macs_per_instruction,
                threads,
                macs_per_s: rates.map(|r| r.0),
                slowest_macs_per_s: rates.map(|r| r.1),
            }
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
    let f = features();
    vec![
        Family {
            name: "amx-int8",
            input: "int8",
            instruction: "tdpbssd",
            macs_per_instruction: 16 * 16 * 64,
            kernel: f.amx_int8().map(peak::amx_int8),
            macs_per_iter: 4 * 16 * 16 * 64,
        },
        Family {
            name: "amx-bf16",
            input: "bf16",
            instruction: "tdpbf16ps",
            macs_per_instruction: 16 * 16 * 32,
            kernel: f.amx_bf16().map(peak::amx_bf16),
            macs_per_iter: 4 * 16 * 16 * 32,
        },
        Family {
            name: "avx512-vnni",
            input: "int8",
            instruction: "vpdpbusd zmm",
            macs_per_instruction: 64,
            kernel: f.avx512vnni().map(peak::vnni512),
            macs_per_iter: ACC * 64,
        },
        Family {
            name: "avx512-bf16",
            input: "bf16",
            instruction: "vdpbf16ps zmm",
            macs_per_instruction: 32,
            kernel: f.avx512bf16().map(peak::bf16_512),
            macs_per_iter: ACC * 32,
        },
        Family {
            name: "avx-vnni",
            input: "int8",
            instruction: "vpdpbusd ymm (VEX)",
            macs_per_instruction: 32,
            kernel: f.avxvnni().map(peak::vnni256),
            macs_per_iter: ACC * 32,
        },
        Family {
            name: "avx2",
            input: "int8",
            instruction: "vpmaddubsw + vpmaddwd + vpaddd",
            macs_per_instruction: 32,
            kernel: f.avx2().map(peak::maddubs),
            macs_per_iter: ACC * 32,
        },
        Family {
            name: "avx512f",
            input: "f32",
            instruction: "vfmadd231ps zmm",
            macs_per_instruction: 16,
            kernel: f.avx512().map(peak::fma512),
            macs_per_iter: ACC * 16,
        },
        Family {
            name: "avx2-fma",
            input: "f32",
            instruction: "vfmadd231ps ymm",
            macs_per_instruction: 8,
            kernel: f.avx2_fma().map(peak::fma256),
            macs_per_iter: ACC * 8,
        },
    ]
}

#[cfg(not(target_arch = "x86_64"))]
fn families() -> Vec<Family> {
    Vec::new()
}

/// Measure the peak rates with `threads` threads (best of 3 runs of about 0.1 s each).
pub fn measure_peak(threads: usize) -> ComputePeak {
    let threads = threads.max(1);
    let (int8_kernel, int8) = match int8_kernel() {
        Some((name, f, macs)) => (name, rates(threads, f, macs).0),
        None => ("none", 0.0),
    };
    let (f32_kernel, f32) = match f32_kernel() {
        Some((name, f, macs)) => (name, rates(threads, f, macs).0),
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
/// `iters` iterations of `macs_per_iter`; (fastest, slowest) of three timings.
fn rates(threads: usize, kernel: Kernel, macs_per_iter: usize) -> (f64, f64) {
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
    let (mut best, mut worst) = (f64::INFINITY, 0f64);
    for _ in 0..3 {
        let t = Instant::now();
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(move || std::hint::black_box(kernel(iters)));
            }
        });
        let secs = t.elapsed().as_secs_f64();
        best = best.min(secs);
        worst = worst.max(secs);
    }
    let macs = (threads * iters * macs_per_iter) as f64;
    (macs / best, macs / worst)
}

/// Whether the CPU runs AMX-INT8 and the operating system lets this process use AMX tile
/// data (Linux hands it out on request: `arch_prctl(ARCH_REQ_XCOMP_PERM, XTILEDATA)`, made
/// once, by [`crate::kernels::cpu`]).
pub fn amx_int8_usable() -> bool {
    features().amx_int8().is_some()
}

/// Whether the CPU runs AMX-BF16 and this process may use AMX tile data (as
/// [`amx_int8_usable`]).
pub fn amx_bf16_usable() -> bool {
    features().amx_bf16().is_some()
}

#[cfg(target_arch = "x86_64")]
fn int8_kernel() -> Option<(&'static str, Kernel, usize)> {
    let f = features();
    if let Some(t) = f.amx_int8() {
        Some(("amx-int8", peak::amx_int8(t), 4 * 16 * 16 * 64))
    } else if let Some(t) = f.avx512vnni() {
        Some(("avx512-vnni", peak::vnni512(t), ACC * 64))
    } else if let Some(t) = f.avxvnni() {
        Some(("avx-vnni", peak::vnni256(t), ACC * 32))
    } else {
        f.avx2().map(|t| ("avx2", peak::maddubs(t), ACC * 32))
    }
}

#[cfg(target_arch = "x86_64")]
fn f32_kernel() -> Option<(&'static str, Kernel, usize)> {
    let f = features();
    if let Some(t) = f.avx512() {
        Some(("avx512f", peak::fma512(t), ACC * 16))
    } else {
        f.avx2_fma().map(|t| ("avx2-fma", peak::fma256(t), ACC * 8))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_is_listed_and_measured_where_the_cpu_runs_it() {
        // Other tests run beside this one, and sharing a core only ever lowers a measured
        // rate: the ratio checks below use each kernel's best over up to four measurements,
        // measuring again only while a check fails.
        let mut all = measure_kernels(1);
        // The slowest of a kernel's runs is there exactly where its fastest is, and no faster.
        for k in &all {
            match (k.macs_per_s, k.slowest_macs_per_s) {
                (Some(fast), Some(slow)) => assert!(slow > 0.0 && slow <= fast, "{k:?}"),
                (None, None) => {}
                _ => panic!("fastest and slowest disagree on whether the kernel ran: {k:?}"),
            }
        }
        for _ in 0..3 {
            if ratio_checks(&all).is_ok() {
                break;
            }
            measure_again(&mut all);
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
        // The same widest kernels as measure_peak, at about its rate. A test on the other
        // vCPU (a hyperthread sibling shares the vector units) can halve either side, so
        // while they disagree both are measured again, each keeping its best (up to four
        // measurements each).
        let mut peak = measure_peak(1);
        for _ in 0..3 {
            let near = rate(&all, &peak.f32_kernel)
                .is_none_or(|r| r > 0.5 * peak.f32_fmas_per_s && r < 2.0 * peak.f32_fmas_per_s);
            if near {
                break;
            }
            measure_again(&mut all);
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
        // A record written before the slowest run was kept still reads.
        let old: KernelPeak = serde_json::from_str(
            r#"{"kernel": "avx2", "input": "int8", "instruction": "x", "macs_per_instruction": 32,
                "threads": 1, "macs_per_s": 1.0e11}"#,
        )
        .unwrap();
        assert_eq!(
            (old.macs_per_s, old.slowest_macs_per_s),
            (Some(1.0e11), None)
        );
    }

    fn rate(all: &[KernelPeak], name: &str) -> Option<f64> {
        all.iter()
            .find(|k| k.kernel == name)
            .and_then(|k| k.macs_per_s)
    }

    /// The rates against each other, as the instructions' widths allow: a wrong count of
    /// multiply-adds per instruction moves a ratio out of its bounds.
    /// Measure every kernel again, each keeping the best of its rates.
    fn measure_again(all: &mut [KernelPeak]) {
        for (k, again) in all.iter_mut().zip(measure_kernels(1)) {
            k.macs_per_s = match (k.macs_per_s, again.macs_per_s) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            };
        }
    }

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
