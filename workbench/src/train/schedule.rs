//! Learning-rate schedule: linear warm-up from 0 to the peak, then linear decay to 0
//! (transformers' `get_linear_schedule_with_warmup`).

use serde::{Deserialize, Serialize};

/// Linear warm-up then linear decay, as transformers' `get_linear_schedule_with_warmup`:
/// the learning rate of optimizer update `step` (0-based) is
/// `peak · step / warmup` while `step < warmup`, then
/// `peak · max(0, (total − step) / (total − warmup))`.
///
/// So the first update has learning rate 0 when `warmup > 0`, exactly as in PyTorch
/// (the scheduler is stepped after the optimizer there).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LinearSchedule {
    /// Peak learning rate, reached at the end of the warm-up.
    pub peak: f64,
    /// Warm-up updates.
    pub warmup_steps: usize,
    /// Total updates of the run.
    pub total_steps: usize,
}

impl LinearSchedule {
    /// A schedule whose warm-up is `ratio` of `total_steps` (rounded up, as transformers'
    /// `warmup_ratio`).
    pub fn with_warmup_ratio(peak: f64, ratio: f64, total_steps: usize) -> Self {
        LinearSchedule {
            peak,
            warmup_steps: (ratio * total_steps as f64).ceil() as usize,
            total_steps,
        }
    }

    /// Learning rate of update `step` (0-based).
    pub fn lr(&self, step: usize) -> f64 {
        if step < self.warmup_steps {
            return self.peak * step as f64 / self.warmup_steps.max(1) as f64;
        }
        let rest = self.total_steps.saturating_sub(self.warmup_steps).max(1) as f64;
        let left = self.total_steps.saturating_sub(step) as f64;
        self.peak * (left / rest).max(0.0)
    }
}
