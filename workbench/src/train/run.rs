//! The training loop: batches, updates, checkpoints, progress, and where it stops.

use super::{
    batching, candle_err, checkpoint, keep_freed_memory, AdamW, LinearSchedule, StepLog,
    TrainConfig, TrainData, TrainLog, Trainable,
};
use crate::{Error, Result};
use candle_nn::VarMap;
use std::path::Path;
use std::time::Instant;

/// Where [`train`] stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Stop {
    /// After the last update of the last epoch.
    #[default]
    End,
    /// After this many updates in total (a checkpoint is written there): for tests of
    /// resumption and for benchmarks.
    AfterSteps(usize),
}

/// Train `model` (whose variables are `vars`) on `data` with `cfg`.
///
/// With `state_dir`, a checkpoint found there is resumed (its config must equal
/// `cfg` and its data the same number of examples), checkpoints are written there
/// every `cfg.checkpoint_every` updates and at the end. Returns the log of the whole
/// run (resumed updates included).
pub fn train<M, D>(
    model: &M,
    vars: &VarMap,
    data: &D,
    cfg: &TrainConfig,
    state_dir: Option<&Path>,
    stop: Stop,
) -> Result<TrainLog>
where
    M: Trainable,
    D: TrainData<Batch = M::Batch> + Sync,
    M: Sync,
{
    cfg.check()?;
    if data.is_empty() {
        return Err(Error::Empty("training data".into()));
    }
    keep_freed_memory();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(cfg.threads)
        .build()
        .map_err(|e| Error::param("threads", e.to_string()))?;
    let lengths: Vec<usize> = (0..data.len()).map(|i| data.length(i)).collect();
    let per_epoch = batching::batches_per_epoch(data.len(), cfg.batch_size, cfg.bucket_batches);
    let total = per_epoch * cfg.epochs;
    let schedule = LinearSchedule::with_warmup_ratio(cfg.lr, cfg.warmup_ratio, total);
    let mut opt = AdamW::new(vars, cfg.adamw)?;
    let mut log = TrainLog {
        steps: Vec::new(),
        total_steps: total,
    };
    if let Some(dir) = state_dir {
        if let Some(state) = checkpoint::load(dir, vars, &mut opt, cfg, data.len())? {
            log = state.log;
        }
    }
    let end = match stop {
        Stop::End => total,
        Stop::AfterSteps(n) => n.min(total),
    };
    let mut bar = crate::progress::bar(end, "training");
    crate::progress::tick(&mut bar, log.steps.len());
    let mut step = log.steps.len();
    while step < end {
        let epoch = step / per_epoch;
        let batches = batching::length_grouped_batches(
            &lengths,
            cfg.batch_size,
            cfg.bucket_batches,
            cfg.seed,
            epoch,
        )?;
        for idx in &batches[step % per_epoch..] {
            if step >= end {
                break;
            }
            let t0 = Instant::now();
            let lr = schedule.lr(step);
            let (loss, grad_norm, padded_len) = pool.install(|| -> Result<(f64, f64, usize)> {
                let batch = data.collate(idx)?;
                let padded_len = idx.iter().map(|&i| lengths[i]).max().unwrap_or(0);
                let loss = model.loss(&batch).map_err(candle_err("forward"))?;
                let grads = loss.backward().map_err(candle_err("backward"))?;
                let norm = opt.grad_norm(&grads)?;
                let scale = match cfg.max_grad_norm {
                    Some(max) if norm > max => max / (norm + 1e-6),
                    _ => 1.0,
                };
                opt.step(&grads, lr, scale)?;
                let l = loss
                    .to_scalar::<f32>()
                    .map_err(candle_err("reading the loss"))?;
                Ok((l as f64, norm, padded_len))
            })?;
            if !loss.is_finite() {
                return Err(Error::param(
                    "lr",
                    format!("the loss became {loss} at update {step} (learning rate {lr:e})"),
                ));
            }
            log.steps.push(StepLog {
                step,
                epoch,
                loss,
                lr,
                grad_norm,
                examples: idx.len(),
                padded_len,
                seconds: t0.elapsed().as_secs_f64(),
            });
            step += 1;
            bar.set_postfix(format!(
                "loss={:.4} ex/s={:.2}",
                log.running_loss(50),
                log.examples_per_second()
            ));
            crate::progress::tick(&mut bar, 1);
            if let (Some(dir), Some(every)) = (state_dir, cfg.checkpoint_every) {
                if step.is_multiple_of(every) && step < end {
                    checkpoint::save(dir, vars, &opt, cfg, data.len(), &log)?;
                }
            }
        }
    }
    if let Some(dir) = state_dir {
        checkpoint::save(dir, vars, &opt, cfg, data.len(), &log)?;
    }
    Ok(log)
}
