//! Q4_K products of candle-core as patched by the workspace (`vendor/candle-core.patch`,
//! docs/dependencies.md): on x86 its repacked tiles keep each sub-block's 6-bit scale and
//! min as bytes beside one f32 scale and min scale per row. The products must agree with the
//! dequantised weights for one activation row (decoding) and several (prompts), on every
//! kernel level the CPU has: AVX-512 VNNI, AVX-VNNI and AVX2 (the last two forced through
//! candle's `MISTRALRS_FORCE_AVXVNNI` / `MISTRALRS_FORCE_AVX2` in a child process, since the
//! level is chosen once per process; a level the CPU lacks is reported on stderr and not run).
//!
//! The weights are built so that a kernel mixing up the parts of a scale fails: each 32-value
//! sub-block has its own span and its own negative lowest value (so its scale and min differ
//! and vary apart), and each row its own power-of-two magnitude (so `d` differs across lanes).

use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{Device, Module, Tensor};

/// Output rows (a multiple of the 16-row tiles) and values per row (two super-blocks).
const N: usize = 32;
const K: usize = 512;

fn weights() -> Vec<f32> {
    let mut w = Vec::with_capacity(N * K);
    for r in 0..N {
        let mag = 2f32.powi(r as i32 % 16 - 8);
        for i in 0..K {
            let sub = i / 32;
            let lowest = -(0.1 + 0.3 * ((sub + r) % 3) as f32);
            let span = 0.5 + 0.25 * ((sub * 7 + r) % 5) as f32;
            // a spread of values over [lowest, lowest + span], different in every sub-block
            let t = ((i * 37 + r * 11) % 32) as f32 / 31.0;
            w.push(mag * (lowest + span * t));
        }
    }
    w
}

fn activations(m: usize) -> Vec<f32> {
    (0..m * K)
        .map(|i| ((i * 53 + 17) % 101) as f32 / 50.0 - 1.0)
        .collect()
}

#[test]
fn q4k_products_match_the_dequantised_weights() {
    let dev = Device::Cpu;
    let w = Tensor::from_vec(weights(), (N, K), &dev).unwrap();
    let q = QTensor::quantize(&w, GgmlDType::Q4K).unwrap();
    let deq: Vec<f32> = q
        .dequantize(&dev)
        .unwrap()
        .flatten_all()
        .unwrap()
        .to_vec1()
        .unwrap();
    let mm = QMatMul::from_qtensor(q).unwrap();
    // not dequantised by candle's CANDLE_DEQUANTIZE_ALL* switches: the quantised kernels run
    assert!(
        matches!(mm, QMatMul::QTensor(_)),
        "candle dequantised the Q4_K weights"
    );
    for m in [1usize, 3, 5] {
        let x = activations(m);
        let got: Vec<f32> = mm
            .forward(&Tensor::from_vec(x.clone(), (m, K), &dev).unwrap())
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1()
            .unwrap();
        for row in 0..m {
            for col in 0..N {
                let xs = &x[row * K..(row + 1) * K];
                let ws = &deq[col * K..(col + 1) * K];
                let want: f32 = xs.iter().zip(ws).map(|(a, b)| a * b).sum();
                let mass: f32 = xs.iter().zip(ws).map(|(a, b)| (a * b).abs()).sum();
                // candle quantises the activations to 8 bits (per 256 values, rounding to a
                // step of max|x|/127): for these activations and weights that moves a product
                // by at most 0.8 % of Σ|x·w|; a scale formed from the wrong parts moves it by
                // several per cent or more
                let err = (got[row * N + col] - want).abs();
                assert!(
                    err <= 1e-2 * mass,
                    "m={m} row {row} col {col}: got {} want {want} (|error| {err} > 1 % of {mass})",
                    got[row * N + col]
                );
            }
        }
    }
}

/// The same on the 256-bit kernels, each in a child process of this test binary.
#[test]
#[cfg(target_arch = "x86_64")]
fn q4k_products_match_on_the_256_bit_kernels() {
    // candle's AVX2 level needs FMA too, and its AVX-VNNI level the AVX2 one's sets
    let avx2 = std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma");
    let levels = [
        ("MISTRALRS_FORCE_AVX2", avx2),
        (
            "MISTRALRS_FORCE_AVXVNNI",
            avx2 && std::is_x86_feature_detected!("avxvnni"),
        ),
    ];
    for (var, cpu_has_it) in levels {
        if !cpu_has_it {
            eprintln!("{var}: this CPU lacks the instruction set, not run");
            continue;
        }
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            // only this level's switch, and nothing that would dequantise the weights
            .env_remove("MISTRALRS_FORCE_AVX2")
            .env_remove("MISTRALRS_FORCE_AVXVNNI")
            .env_remove("CANDLE_DEQUANTIZE_ALL")
            .env_remove("CANDLE_DEQUANTIZE_ALL_F16")
            .args([
                "--exact",
                "q4k_products_match_the_dequantised_weights",
                "--test-threads",
                "1",
            ])
            .env(var, "1")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("1 passed"),
            "{var}=1: {}\n{stdout}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
