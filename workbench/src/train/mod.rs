//! A generic training loop for candle models (feature `dense`): the extractive reader
//! and the rerankers share it.
//!
//! | file | what |
//! |---|---|
//! | `mod.rs` | [`Trainable`], [`TrainData`], [`TrainConfig`], [`TrainLog`] |
//! | [`run`] | [`train`] (the loop) and where it [`Stop`]s |
//! | [`schedule`] | linear warm-up then linear decay |
//! | [`batching`] | seeded length-grouped batches |
//! | [`optim`] | AdamW with checkpointable state, no decay on biases / LayerNorm |
//! | [`checkpoint`] | resumable training state (weights, moments, step, RNG, data position) |
//! | [`encoder`] | [`encoder::BertEncoder`]: the differentiable BERT-family encoder the reader and the rerankers train |
//! | [`ops`] | fused LayerNorm, softmax and GELU with backward passes |
//! | [`qa`] | the reader's [`QaModel`](crate::read::extractive::QaModel) as a [`Trainable`], training windows with start/end targets |
//! | [`cross`] | the cross-encoder (`BertForSequenceClassification`, one logit) as a [`Trainable`], group loss, encoded groups, HF-layout saving |
//! | [`cross_recipe`] | cross-encoder recipes, train-once cache (`data/cache/cross-encoders/<key>/`), `trained:<recipe>` checkpoints |
//! | [`colbert`] | ColBERT projection training: report 003's loss on frozen MiniLM token vectors, `[Q]`/`[D]` markers, `[MASK]` padding |
//! | [`groups`] | reranker training groups: (question, positive, BM25 hard negatives) over the reader's supervision |
//! | [`qa_data`] | supervision: SQuAD article split, RAG Mini Wikipedia located, NQ distant supervision |
//! | [`reader`] | reader recipes, supervision assembly, train-once cache (`data/cache/readers/<key>/`) |
//!
//! The loop: each epoch's batch order is a pure function of `(seed, epoch)`
//! ([`batching::length_grouped_batches`]), the global step is the data position, and a
//! checkpoint holds the weights, the AdamW moments, the step and the log so far; a run
//! resumed from any checkpoint replays exactly the updates an uninterrupted run does.

pub mod batching;
pub mod checkpoint;
pub mod colbert;
pub mod cross;
pub mod cross_recipe;
pub use crate::encode::trainable as encoder;
pub mod groups;
pub use crate::encode::trainable::ops;
mod errors;
pub mod optim;
pub mod qa;
pub mod qa_data;
pub mod reader;
pub mod run;
pub mod schedule;

use crate::{Error, Result};
use candle_core::Tensor;
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::Instant;

pub(crate) use errors::candle_err;
pub use optim::{AdamW, AdamWParams};
pub use run::{no_training, train, training_allowed, NoTraining, Stop};
pub use schedule::LinearSchedule;

/// The glibc malloc settings [`keep_freed_memory`] makes, by their `GLIBC_TUNABLES` names
/// (`glibc.malloc.<name>`): one arena, no mmap'd chunks, no trimming, 256 MiB of top pad.
/// [`malloc_tunables`] gives them to another process (a benchmark's peer) unchanged.
pub const KEEP_FREED_MEMORY: [(&str, i64); 4] = [
    ("arena_max", 1),
    ("mmap_max", 0),
    ("trim_threshold", i32::MAX as i64),
    ("top_pad", 256 << 20),
];

/// [`KEEP_FREED_MEMORY`] as a `GLIBC_TUNABLES` value
/// (`glibc.malloc.arena_max=1:glibc.malloc.mmap_max=0:…`), so that a process glibc starts
/// (a Python peer) allocates with the settings this process's training loop uses.
pub fn malloc_tunables() -> String {
    KEEP_FREED_MEMORY
        .iter()
        .map(|(name, v)| format!("glibc.malloc.{name}={v}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// Keep freed memory in the process instead of returning it to the kernel (glibc
/// only; a no-op elsewhere): the settings of [`KEEP_FREED_MEMORY`]. Every training step
/// allocates and frees the same large
/// activation and gradient buffers; with glibc's defaults each buffer above the mmap
/// threshold is a fresh `mmap`, so every step pays page faults and the kernel's page
/// zeroing (`perf` on the default reader run: `clear_page_erms` 14 % of samples, 40 M
/// minor faults and 16 % of CPU time in the kernel over 106 updates). With one arena, no
/// mmap'd chunks and no trimming, the buffers are reused from the heap. Called once by
/// [`train`]; the process keeps its peak heap until it exits.
pub fn keep_freed_memory() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        for (name, value) in KEEP_FREED_MEMORY {
            let param = match name {
                "arena_max" => libc::M_ARENA_MAX,
                "mmap_max" => libc::M_MMAP_MAX,
                "trim_threshold" => libc::M_TRIM_THRESHOLD,
                "top_pad" => libc::M_TOP_PAD,
                _ => continue,
            };
            let value = i32::try_from(value).unwrap_or(i32::MAX);
            // SAFETY: mallopt only changes allocator parameters; it is called before the
            // loop's threads allocate (and glibc serialises it against malloc anyway).
            unsafe {
                libc::mallopt(param, value);
            }
        }
    });
}

/// Multiply-adds per second of the training encoder's f32 matrix product ([`ops::linear`],
/// the gemm crate's kernels) for `rows × inputs` activations and an `outputs × inputs`
/// weight, on a pool of `threads`: the fastest of `reps` timed products after an untimed
/// one. For benchmarks, beside a peer's product at the same shape.
pub fn linear_rate(
    rows: usize,
    inputs: usize,
    outputs: usize,
    threads: usize,
    reps: usize,
) -> Result<f64> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| Error::param("threads", e.to_string()))?;
    pool.install(|| {
        let e = candle_err("timing a product");
        let dev = candle_core::Device::Cpu;
        let x = Tensor::randn(0f32, 1.0, (rows, inputs), &dev).map_err(&e)?;
        let w = Tensor::randn(0f32, 1.0, (outputs, inputs), &dev).map_err(&e)?;
        let b = Tensor::zeros(outputs, candle_core::DType::F32, &dev).map_err(&e)?;
        ops::linear(&x, &w, &b).map_err(&e)?;
        let mut best = f64::INFINITY;
        for _ in 0..reps.max(1) {
            let t0 = Instant::now();
            let y = ops::linear(&x, &w, &b).map_err(&e)?;
            best = best.min(t0.elapsed().as_secs_f64());
            drop(y);
        }
        Ok((rows * inputs * outputs) as f64 / best)
    })
}

/// A model the loop can train: a scalar loss of one batch, built from variables of
/// the [`VarMap`] passed to [`train`].
pub trait Trainable {
    /// The collated batch.
    type Batch;
    /// The mean loss of the batch (a scalar tensor).
    fn loss(&self, batch: &Self::Batch) -> candle_core::Result<Tensor>;
}

/// Training examples: how long each is (for length grouping) and how to collate a batch.
pub trait TrainData {
    /// The collated batch.
    type Batch;
    /// Number of examples.
    fn len(&self) -> usize;
    /// True when there are no examples.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Length of example `i` (tokens).
    fn length(&self, i: usize) -> usize;
    /// Collate the examples `idx` into a batch.
    fn collate(&self, idx: &[usize]) -> Result<Self::Batch>;
}

/// Hyper-parameters of a run; everything that changes the result is here.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainConfig {
    /// Passes over the data.
    pub epochs: usize,
    /// Examples per update.
    pub batch_size: usize,
    /// Peak learning rate.
    pub lr: f64,
    /// Fraction of the updates spent warming up.
    pub warmup_ratio: f64,
    /// AdamW parameters (weight decay among them).
    pub adamw: AdamWParams,
    /// Clip the gradients to this global L2 norm (`None`: no clipping).
    pub max_grad_norm: Option<f64>,
    /// Seed of the batch order (the model's initialisation takes its own seed).
    pub seed: u64,
    /// Batches per length-sorting bucket; 0 = random batches.
    pub bucket_batches: usize,
    /// Rayon threads for the run.
    pub threads: usize,
    /// Write a checkpoint every this many updates (`None`: only at the end).
    pub checkpoint_every: Option<usize>,
}

impl Default for TrainConfig {
    fn default() -> Self {
        TrainConfig {
            epochs: 2,
            batch_size: 16,
            lr: 1e-4,
            warmup_ratio: 0.1,
            adamw: AdamWParams::default(),
            max_grad_norm: Some(1.0),
            seed: 42,
            bucket_batches: 8,
            threads: 2,
            checkpoint_every: None,
        }
    }
}

impl TrainConfig {
    /// Check the values.
    pub fn check(&self) -> Result<()> {
        if self.epochs == 0 {
            return Err(Error::param("epochs", "must be at least 1"));
        }
        if self.batch_size == 0 {
            return Err(Error::param("batch_size", "must be at least 1"));
        }
        if !(self.lr > 0.0 && self.lr.is_finite()) {
            return Err(Error::param(
                "lr",
                format!("{} is not a positive number", self.lr),
            ));
        }
        if !(0.0..1.0).contains(&self.warmup_ratio) {
            return Err(Error::param("warmup_ratio", "must be in [0, 1)"));
        }
        if self.threads == 0 {
            return Err(Error::param("threads", "must be at least 1"));
        }
        if self
            .max_grad_norm
            .is_some_and(|n| n <= 0.0 || !n.is_finite())
        {
            return Err(Error::param("max_grad_norm", "must be positive"));
        }
        Ok(())
    }
}

/// One update of the log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepLog {
    /// 0-based update number.
    pub step: usize,
    /// Epoch of the update.
    pub epoch: usize,
    /// Batch loss.
    pub loss: f64,
    /// Learning rate used.
    pub lr: f64,
    /// Global gradient norm before clipping.
    pub grad_norm: f64,
    /// Examples in the batch.
    pub examples: usize,
    /// Padded length of the batch (tokens).
    pub padded_len: usize,
    /// Seconds the update took (forward, backward, optimizer).
    pub seconds: f64,
}

/// The log of a run, saved with every checkpoint.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TrainLog {
    /// Every update done so far, in order.
    pub steps: Vec<StepLog>,
    /// Updates in the whole run.
    pub total_steps: usize,
}

impl TrainLog {
    /// Examples per second over the logged updates (training time only).
    pub fn examples_per_second(&self) -> f64 {
        let ex: usize = self.steps.iter().map(|s| s.examples).sum();
        let t: f64 = self.steps.iter().map(|s| s.seconds).sum();
        if t > 0.0 {
            ex as f64 / t
        } else {
            0.0
        }
    }

    /// Total training seconds over the logged updates.
    pub fn seconds(&self) -> f64 {
        self.steps.iter().map(|s| s.seconds).sum()
    }

    /// Mean loss of the last `n` updates.
    pub fn running_loss(&self, n: usize) -> f64 {
        let k = self.steps.len().min(n).max(1);
        let tail = &self.steps[self.steps.len().saturating_sub(k)..];
        tail.iter().map(|s| s.loss).sum::<f64>() / tail.len().max(1) as f64
    }

    /// Write the log as CSV (`step,epoch,loss,lr,grad_norm,examples,padded_len,seconds`).
    pub fn write_csv(&self, path: &Path) -> Result<()> {
        let mut w =
            csv::Writer::from_path(path).map_err(|e| Error::bad_input(path, e.to_string()))?;
        for s in &self.steps {
            w.serialize(s)
                .map_err(|e| Error::bad_input(path, e.to_string()))?;
        }
        w.flush().map_err(|e| Error::io(path, e))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn malloc_tunables_name_every_setting_of_the_loop() {
        assert_eq!(
            super::malloc_tunables(),
            "glibc.malloc.arena_max=1:glibc.malloc.mmap_max=0:\
             glibc.malloc.trim_threshold=2147483647:glibc.malloc.top_pad=268435456"
        );
    }
}
