//! A question read the way a user reads it (the calls of a notebook cell or `ask`:
//! [`Llm::from_asset`] with the default options, then [`GenerativeReader::read`]) runs at the
//! speed `bench_llm` measures for the same model (the same prompt ids through
//! [`Llm::generate_ids`] with the benchmark's parameters), in one process: SmolLM2-135M, a
//! RAG prompt of about 550 tokens. Both paths run in this workspace's build (its patched
//! candle-core; a notebook's kernel declares the same patch, `scripts/evcxr_kernel`).
//!
//! - The first question after load is timed on its own (the one-off preparation of the
//!   weights happens at load, [`LoadOptions::warm_up`]); then each path runs once untimed,
//!   and `ROUNDS` rounds time both paths, their order alternating.
//! - Fails when the user's path is more than 1.3× slower than the benchmark's, as the median
//!   of the per-round ratios of prefill tokens/s and of decode tokens/s, or when the first
//!   question's prefill is more than 1.3× slower than the slowest warm round.

use workbench::assets::Assets;
use workbench::bench::median;
use workbench::machine::load_average;
use workbench::read::generative::{Generation, GenerativeReader, Llm, LoadOptions, ReaderOptions};
use workbench::read::{Context, Reader};

const MODEL: &str = "smollm2-135m-instruct-gguf";
const ROUNDS: usize = 5;
const NEW_TOKENS: usize = 32;
const SLOWER: f64 = 1.3;

/// Question q4 of RAG-Mini-Wikipedia and the passages of its article from the first one
/// holding the answer on (as `bench_llm` builds its RAG prompt), as many as keep the
/// reader's prompt within `tokens`.
fn question_and_passages(reader: &GenerativeReader, tokens: usize) -> (String, Vec<Context>) {
    let assets = Assets::load().unwrap();
    let (docs, qas) = workbench::load::rag_mini::load_csv(
        &assets.resolve("rag-mini-wikipedia", "infos.csv").unwrap(),
        &assets
            .resolve("rag-mini-wikipedia", "questions.csv")
            .unwrap(),
    )
    .expect("RAG-Mini-Wikipedia in the asset cache (scripts/test fetches it)");
    let qa = &qas[4];
    let first = docs
        .iter()
        .position(|d| d.text.contains(qa.answers[0].as_str()))
        .unwrap();
    let ctx = |n: usize| -> Vec<Context> {
        docs[first..first + n]
            .iter()
            .enumerate()
            .map(|(i, d)| Context::new(format!("p{}", i + 1), d.text.trim().to_string()))
            .collect()
    };
    let mut n = 1;
    while reader
        .build_prompt(&qa.question, &ctx(n + 1))
        .unwrap()
        .ids
        .len()
        <= tokens
    {
        n += 1;
    }
    (qa.question.clone(), ctx(n))
}

/// (prefill, decode) tokens/s of a generation.
fn rates(g: &Generation) -> (f64, f64) {
    (g.prefill_tokens_per_sec(), g.decode_tokens_per_sec())
}

#[test]
fn a_users_read_runs_at_the_benchmarks_speed() {
    let llm = Llm::from_asset(MODEL, &LoadOptions::default()).unwrap();
    let info = llm.info();
    let mut opts = ReaderOptions::default();
    opts.params.max_new_tokens = NEW_TOKENS;
    let mut reader = GenerativeReader::new(llm, opts).unwrap();
    let (question, passages) = question_and_passages(&reader, 550);
    let ids = reader.build_prompt(&question, &passages).unwrap().ids;
    // The reader's own generation parameters (stop strings included), so that both calls
    // generate the same tokens and decode over the same cache lengths.
    let bench = reader.options().params.clone();
    // (prefill tok/s, decode passes/s, generated tokens, decode passes)
    let user = |r: &mut GenerativeReader| {
        let a = r.read(&question, &passages).unwrap();
        let u = &a.usage;
        (
            u.prefill_tokens_per_sec(),
            u.decode_tokens_per_sec(),
            u.generated_tokens,
            u.decode_steps,
        )
    };
    let bench_run = |r: &GenerativeReader| {
        let g = r.llm().lock().unwrap().generate_ids(&ids, &bench).unwrap();
        let (p, d) = rates(&g);
        (p, d, g.generated_tokens, g.decode_steps)
    };
    let first = user(&mut reader);
    user(&mut reader);
    bench_run(&reader);
    let (mut pr, mut dr, mut warm_prefill) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        let (u, b) = if round % 2 == 0 {
            let u = user(&mut reader);
            (u, bench_run(&reader))
        } else {
            let b = bench_run(&reader);
            (user(&mut reader), b)
        };
        eprintln!(
            "round {round}: user prefill {:.1} decode {:.1} tok/s; bench prefill {:.1} decode {:.1} tok/s (load {})",
            u.0,
            u.1,
            b.0,
            b.1,
            load_average()
        );
        assert_eq!(
            (u.2, u.3),
            (b.2, b.3),
            "the two calls generated different tokens or decode passes"
        );
        assert!(
            u.3 >= 8,
            "only {} decode passes: too few to time decoding",
            u.3
        );
        warm_prefill.push(u.0);
        pr.push(b.0 / u.0);
        dr.push(b.1 / u.1);
    }
    let (p, d, w) = (median(&pr), median(&dr), median(&warm_prefill));
    eprintln!(
        "{MODEL}: {} prompt tokens; load {:.2} s (warm-up {:.2} s); first question prefill {:.1} tok/s, decode {:.1} tok/s; warm user prefill {w:.1} tok/s; bench/user median ratio prefill {p:.2} (spread {:.2}–{:.2}), decode {d:.2} (spread {:.2}–{:.2})",
        ids.len(),
        info.load_secs,
        info.warm_up_secs,
        first.0,
        first.1,
        pr.iter().copied().fold(f64::INFINITY, f64::min),
        pr.iter().copied().fold(0.0, f64::max),
        dr.iter().copied().fold(f64::INFINITY, f64::min),
        dr.iter().copied().fold(0.0, f64::max),
    );
    assert!(
        info.warm_up_secs > 0.0,
        "the default load warms the model up"
    );
    assert!(
        p <= SLOWER,
        "the user's prefill is {p:.2}× slower than the benchmark's"
    );
    assert!(
        d <= SLOWER,
        "the user's decode is {d:.2}× slower than the benchmark's"
    );
    // One first question against the slowest warm round, so that a single slow moment of a
    // shared machine does not fail it; the one-off preparation (several times the warm
    // prefill where it applies) does.
    let slowest = warm_prefill.iter().copied().fold(f64::INFINITY, f64::min);
    assert!(
        slowest / first.0 <= SLOWER,
        "the first question's prefill ran at {:.1} tok/s, {:.2}× slower than the slowest warm round ({slowest:.1})",
        first.0,
        slowest / first.0
    );
}
