//! Q8_0 products of candle-core as patched by the workspace (`vendor/candle-core.patch`,
//! docs/dependencies.md), including rows whose length is not a multiple of 256 (Qwen2.5
//! 0.5B's hidden size 896, SmolLM2-135M's 576). On x86 with VNNI these run on the repacked
//! tiles, with each 32-value block of the activations quantised on its own scale (Q8_0, as
//! ggml's Q8_0 x Q8_0 product) and the last superblock zero-padded. Each product must equal,
//! up to f32 summation, the dot product of the dequantised weights with those dequantised
//! activations: it does not when a tile or a block's scale is read from the wrong place, when
//! the activations share one scale per 256 values, or when the padded superblock reads past a
//! row. One row's product must not depend on how many rows are multiplied with it. (Which
//! kernel ran is not visible here: candle's unpacked Q8_0 product quantises the same way;
//! `bench_llm` shows the speed.)

use candle_core::quantized::k_quants::{BlockQ8_0, GgmlType};
use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{Device, Module, Tensor};

/// Output rows: three 16-row tiles.
const N: usize = 48;

#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
fn weights(k: usize) -> Vec<f32> {
    (0..N * k)
        .map(|i| {
            let (r, c) = (i / k, i % k);
            // each row its own magnitude, each 32-value block its own spread
            let mag = 2f32.powi((r % 7) as i32 - 3);
            let t = ((c * 37 + r * 11) % 61) as f32 / 30.0 - 1.0;
            mag * t * (1.0 + (c / 32 % 5) as f32 * 0.3)
        })
        .collect()
}

#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
fn activations(m: usize, k: usize) -> Vec<f32> {
    (0..m * k)
        .map(|i| {
            let (r, c) = (i / k, i % k);
            // the largest magnitudes sit in the last, partial superblock for some rows
            let boost = if c >= k - 64 && r % 2 == 0 { 3.0 } else { 1.0 };
            boost * (((i * 53 + 17) % 101) as f32 / 50.0 - 1.0)
        })
        .collect()
}

/// The row quantised as the tiles' activations are (32-value Q8_0 blocks), dequantised.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
fn q8_0_round_trip(row: &[f32]) -> Vec<f32> {
    let mut blocks = vec![BlockQ8_0::zeros(); row.len() / 32];
    BlockQ8_0::from_float(row, &mut blocks);
    let mut back = vec![0f32; row.len()];
    BlockQ8_0::to_float(&blocks, &mut back);
    back
}

#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
fn product(mm: &QMatMul, x: &[f32], m: usize, k: usize) -> Vec<f32> {
    mm.forward(&Tensor::from_vec(x.to_vec(), (m, k), &Device::Cpu).unwrap())
        .unwrap()
        .flatten_all()
        .unwrap()
        .to_vec1()
        .unwrap()
}

#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
fn check(k: usize) {
    let dev = Device::Cpu;
    let w = Tensor::from_vec(weights(k), (N, k), &dev).unwrap();
    let q = QTensor::quantize(&w, GgmlDType::Q8_0).unwrap();
    let deq: Vec<f32> = q
        .dequantize(&dev)
        .unwrap()
        .flatten_all()
        .unwrap()
        .to_vec1()
        .unwrap();
    let mm = QMatMul::from_qtensor(q).unwrap();
    assert!(
        matches!(mm, QMatMul::QTensor(_)),
        "candle dequantised the Q8_0 weights"
    );
    // 9 rows: two full groups of the kernel's 4 rows and one row over
    let m = 9;
    let x = activations(m, k);
    let got = product(&mm, &x, m, k);
    for row in 0..m {
        let xq = q8_0_round_trip(&x[row * k..(row + 1) * k]);
        let alone = product(&mm, &x[row * k..(row + 1) * k], 1, k);
        for col in 0..N {
            let ws = &deq[col * k..(col + 1) * k];
            let want: f64 = xq.iter().zip(ws).map(|(a, b)| *a as f64 * *b as f64).sum();
            let mass: f64 = xq
                .iter()
                .zip(ws)
                .map(|(a, b)| (*a as f64 * *b as f64).abs())
                .sum();
            let g = got[row * N + col];
            // f32 sums of exact integer block sums: far below 1e-5 of Σ|x·w|; one activation
            // scale per 256 values moves products by ~1e-3 of it
            assert!(
                (g as f64 - want).abs() <= 1e-5 * mass,
                "k={k} row {row} col {col}: got {g}, want {want} (Σ|x·w| {mass})"
            );
            assert_eq!(
                g.to_bits(),
                alone[col].to_bits(),
                "k={k} row {row} col {col}: {g} among {m} rows, {} alone",
                alone[col]
            );
        }
    }
}

#[test]
fn q8_0_products_with_a_partial_superblock_match_the_dequantised_blocks() {
    #[cfg(target_arch = "x86_64")]
    {
        let vnni512 = std::is_x86_feature_detected!("avx512vnni")
            && std::is_x86_feature_detected!("avx512bw");
        let vnni256 = std::is_x86_feature_detected!("avxvnni")
            && std::env::var_os("MISTRALRS_FORCE_AVX2").is_none();
        if !vnni512 && !vnni256 {
            eprintln!(
                "SKIP q8_0_products_with_a_partial_superblock_match_the_dequantised_blocks: Q8_0 tiles need VNNI, this CPU lacks it"
            );
            return;
        }
        check(896);
        check(576);
        // whole superblocks still take the same path
        check(512);
    }
    #[cfg(not(target_arch = "x86_64"))]
    eprintln!(
        "SKIP q8_0_products_with_a_partial_superblock_match_the_dequantised_blocks: the tiles are x86 only"
    );
}

/// The same on the 256-bit AVX-VNNI kernel, in a child process of this test binary (candle
/// picks its kernel level once per process).
#[test]
#[cfg(target_arch = "x86_64")]
fn q8_0_products_match_on_the_avx_vnni_kernel() {
    if !(std::is_x86_feature_detected!("avx2")
        && std::is_x86_feature_detected!("fma")
        && std::is_x86_feature_detected!("avxvnni"))
    {
        eprintln!("SKIP q8_0_products_match_on_the_avx_vnni_kernel: this CPU lacks AVX-VNNI");
        return;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .env_remove("MISTRALRS_FORCE_AVX2")
        .env_remove("CANDLE_DEQUANTIZE_ALL")
        .env_remove("CANDLE_DEQUANTIZE_ALL_F16")
        .env("MISTRALRS_FORCE_AVXVNNI", "1")
        .args([
            "--exact",
            "q8_0_products_with_a_partial_superblock_match_the_dequantised_blocks",
            "--test-threads",
            "1",
            "--nocapture",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("1 passed") && !stderr.contains("SKIP"),
        "MISTRALRS_FORCE_AVXVNNI=1: {}\n{stdout}\n{stderr}",
        out.status
    );
}

/// Decoding's fused product of several weights sharing one activation row (q, k, v; gate,
/// up) gives each weight the bits of its own product.
#[test]
fn fused_single_row_products_equal_the_separate_ones() {
    let dev = Device::Cpu;
    for k in [896usize, 576, 512] {
        let q = |seed: usize| {
            let w: Vec<f32> = weights(k)
                .iter()
                .map(|v| v * (1.0 + seed as f32 * 0.1))
                .collect();
            QTensor::quantize(&Tensor::from_vec(w, (N, k), &dev).unwrap(), GgmlDType::Q8_0).unwrap()
        };
        let (a, b) = (q(0), q(1));
        let x = Tensor::from_vec(activations(1, k), (1, k), &dev).unwrap();
        let fused = QTensor::gemv_fused_shared_lhs(&[&a, &b], &x).unwrap();
        let Some(fused) = fused else {
            eprintln!("SKIP fused_single_row_products_equal_the_separate_ones: no fused kernel here (k = {k})");
            continue;
        };
        for (t, f) in [a, b].into_iter().zip(fused) {
            let mm = QMatMul::from_qtensor(t).unwrap();
            let alone: Vec<f32> = mm
                .forward(&x)
                .unwrap()
                .flatten_all()
                .unwrap()
                .to_vec1()
                .unwrap();
            let f: Vec<f32> = f.flatten_all().unwrap().to_vec1().unwrap();
            for (i, (p, q)) in f.iter().zip(&alone).enumerate() {
                assert_eq!(
                    p.to_bits(),
                    q.to_bits(),
                    "k={k} col {i}: fused {p}, alone {q}"
                );
            }
        }
    }
}
