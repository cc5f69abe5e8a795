//! Compute ceilings of this CPU, one row per kernel family: the peak multiply-add rate of
//! each instruction a matrix product can run on (AMX int8 and bf16 tiles, AVX-512 VNNI and
//! bf16 dot products, 256-bit VNNI, AVX2 int8, f32 FMAs), measured on one thread and on
//! every logical CPU (`workbench::machine::measure_kernels`). A speed measured elsewhere is held to
//! the ceiling of the path it runs: a bf16 AMX prefill to `amx-bf16`, an AVX-512 VNNI one to
//! `avx512-vnni` or `avx-vnni`, not to the widest kernel of the machine.
//!
//! ```text
//! cargo run --release --bin bench_ceilings
//! ```
//! Writes `data/results/bench-ceilings/`: `bench.md`, `bench.csv`, `summary.json`.

use anyhow::Result;
use clap::Parser;
use serde::Serialize;
use workbench::bench::BenchRun;
use workbench::display::Table;
use workbench::machine::{load_average_1min, measure_kernels};

#[derive(Parser, Serialize, Debug)]
#[command(
    about = "Peak multiply-add rate of each kernel family on this CPU (1 thread and all cores)"
)]
struct Args {
    /// Threads of the all-cores measurement (default: every CPU the process may use).
    #[arg(long)]
    threads: Option<usize>,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let all = args.threads.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    });
    let BenchRun { exp, machine } = BenchRun::start("bench-ceilings", &args, "bench.md")?;
    println!("{}", machine.summary());
    let load0 = load_average_1min();
    let one = measure_kernels(1);
    let many = measure_kernels(all);
    let load1 = load_average_1min();
    let g = |r: Option<f64>| {
        r.map_or("not run (CPU or OS)".to_string(), |r| {
            format!("{:.0}", r / 1e9)
        })
    };
    // The fastest run, with the slowest beside it where the two differ once rounded.
    let spread = |k: &workbench::machine::KernelPeak| match (k.macs_per_s, k.slowest_macs_per_s) {
        (Some(fast), Some(slow)) if g(Some(slow)) != g(Some(fast)) => {
            format!("{} ({}–{})", g(Some(fast)), g(Some(slow)), g(Some(fast)))
        }
        (fast, _) => g(fast),
    };
    let header = |slowest: bool| {
        let mut h = vec![
            "kernel".to_string(),
            "input".into(),
            "instruction".into(),
            "multiply-adds per instruction (avx2: per 3)".into(),
            "G multiply-adds/s, 1 thread".into(),
            format!("G multiply-adds/s, {all} threads"),
        ];
        if slowest {
            h.push("G multiply-adds/s, 1 thread, slowest of 3".into());
            h.push(format!("G multiply-adds/s, {all} threads, slowest of 3"));
        }
        h
    };
    let caption = format!(
        "Peak multiply-add rates, best of 3 runs of about 0.1 s per kernel (12 independent vector accumulators, AMX: 4 tile accumulators; no memory traffic), on 1 thread and on {all} threads (every logical CPU), with the range slowest–fastest of the 3 in brackets where the slowest rounds differently; a kernel is not run where the CPU lacks it or, for AMX, the OS does not grant tile data; 1-min load average {load0:.2} → {load1:.2}"
    );
    // The CSV keeps fastest and slowest in columns of their own; the page shows them together.
    let mut csv = Table::new(header(true));
    let mut t = Table::new(header(false)).caption(caption);
    for (a, b) in one.iter().zip(&many) {
        let head = [
            a.kernel.clone(),
            a.input.clone(),
            a.instruction.clone(),
            a.macs_per_instruction.to_string(),
        ];
        let mut row = head.to_vec();
        row.extend([
            g(a.macs_per_s),
            g(b.macs_per_s),
            g(a.slowest_macs_per_s),
            g(b.slowest_macs_per_s),
        ]);
        csv.push(row)?;
        let mut row = head.to_vec();
        row.extend([spread(a), spread(b)]);
        t.push(row)?;
    }
    csv.write_csv(&exp.out.path("bench.csv"))?;
    let md = format!("{}\n\n{}\n", machine.summary(), t.to_markdown());
    std::fs::write(exp.out.path("bench.md"), &md)?;
    exp.finish(serde_json::json!({
        "one_thread": one,
        "all_threads": many,
        "threads": all,
        "loadavg_1min": [load0, load1],
    }))?;
    println!("{md}");
    Ok(())
}
