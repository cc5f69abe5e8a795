//! The training loop: batches, updates, checkpoints, progress, and where it stops.

use super::{
    batching, candle_err, checkpoint, keep_freed_memory, AdamW, LinearSchedule, StepLog,
    TrainConfig, TrainData, TrainLog, Trainable,
};
use crate::{Error, Result};
use candle_nn::VarMap;
use std::path::Path;
use std::time::Instant;

thread_local! {
    /// Set while a builder runs on this thread ([`no_training`]).
    static BUILDING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// While the returned guard lives, [`train`] and the recipes' training (which check
/// [`training_allowed`] before they mine groups or encode anything) fail on this thread
/// instead of training. The builders hold one: building loads what was resolved, and a
/// path from a builder into training is an error rather than a silent training run.
pub fn no_training() -> NoTraining {
    NoTraining {
        before: BUILDING.with(|b| b.replace(true)),
    }
}

/// The guard of [`no_training`]; dropping it restores what was there before.
#[derive(Debug)]
pub struct NoTraining {
    before: bool,
}

impl Drop for NoTraining {
    fn drop(&mut self) {
        BUILDING.with(|b| b.set(self.before));
    }
}

/// `Ok` unless a [`no_training`] guard lives on this thread; the error names `what`.
pub fn training_allowed(what: &str) -> Result<()> {
    if BUILDING.with(|b| b.get()) {
        return Err(Error::param(
            "training",
            format!(
                "{what}: a builder reached training; resolve trained models first \
                 (`pipeline::trained`), builders only load"
            ),
        ));
    }
    Ok(())
}

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
    training_allowed("training")?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{DType, Device, Tensor};

    /// One weight, loss (w − 1)².
    struct Toy(candle_nn::Linear);
    impl Trainable for Toy {
        type Batch = ();
        fn loss(&self, _: &()) -> candle_core::Result<Tensor> {
            let x = Tensor::ones((1, 1), DType::F32, &Device::Cpu)?;
            (candle_nn::Module::forward(&self.0, &x)? - 1.0)?
                .sqr()?
                .mean_all()
        }
    }
    struct Four;
    impl TrainData for Four {
        type Batch = ();
        fn len(&self) -> usize {
            4
        }
        fn length(&self, _: usize) -> usize {
            1
        }
        fn collate(&self, _: &[usize]) -> Result<()> {
            Ok(())
        }
    }

    #[test]
    fn training_fails_while_a_builder_holds_the_guard() {
        let vars = VarMap::new();
        let vb = candle_nn::VarBuilder::from_varmap(&vars, DType::F32, &Device::Cpu);
        let model = Toy(candle_nn::linear_no_bias(1, 1, vb).unwrap());
        let cfg = TrainConfig {
            epochs: 1,
            batch_size: 2,
            threads: 1,
            ..TrainConfig::default()
        };
        {
            let _guard = no_training();
            let e = train(&model, &vars, &Four, &cfg, None, Stop::End).unwrap_err();
            assert!(e.to_string().contains("a builder reached training"), "{e}");
            // Nested guards restore what was there before them.
            drop(no_training());
            assert!(training_allowed("x").is_err());
        }
        assert!(training_allowed("x").is_ok());
        let log = train(&model, &vars, &Four, &cfg, None, Stop::End).unwrap();
        assert_eq!(log.steps.len(), 2);
    }
}
