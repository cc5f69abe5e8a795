//! Resumable training state in a directory:
//!
//! | file | what |
//! |---|---|
//! | `weights.safetensors` | every variable of the [`VarMap`] |
//! | `optimizer.safetensors` | the AdamW moments |
//! | `state.json` | the update count (= data position), the seed and epoch (= RNG state: each epoch's order is a function of both), the config, the number of examples, the log |
//!
//! Files are written under temporary names and renamed, so a run killed while saving
//! leaves the previous checkpoint intact.

use super::{candle_err, AdamW, TrainConfig, TrainLog};
use crate::{Error, Result};

pub use crate::encode::trainable::save_hf_layout;
use candle_nn::VarMap;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// `state.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TrainState {
    /// Updates done (the next update's 0-based number; also the data position).
    pub step: usize,
    /// Epoch of the next update.
    pub epoch: usize,
    /// The run's seed (the batch order of epoch `e` is `length_grouped_batches(…, seed, e)`).
    pub seed: u64,
    /// The run's config (a resumed run must have the same).
    pub config: TrainConfig,
    /// Number of training examples.
    pub examples: usize,
    /// The log so far.
    pub log: TrainLog,
}

/// Write a checkpoint of `vars`, `opt` and `log` into `dir`.
pub fn save(
    dir: &Path,
    vars: &VarMap,
    opt: &AdamW,
    cfg: &TrainConfig,
    examples: usize,
    log: &TrainLog,
) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let per_epoch =
        super::batching::batches_per_epoch(examples, cfg.batch_size, cfg.bucket_batches);
    let step = log.steps.len();
    let state = TrainState {
        step,
        epoch: step / per_epoch.max(1),
        seed: cfg.seed,
        config: cfg.clone(),
        examples,
        log: log.clone(),
    };
    let tmp_w = dir.join("weights.safetensors.tmp");
    vars.save(&tmp_w).map_err(candle_err("saving weights"))?;
    let tmp_o = dir.join("optimizer.safetensors.tmp");
    opt.save(&tmp_o)?;
    let tmp_s = dir.join("state.json.tmp");
    std::fs::write(&tmp_s, serde_json::to_vec(&state)?).map_err(|e| Error::io(&tmp_s, e))?;
    for (tmp, name) in [
        (tmp_w, "weights.safetensors"),
        (tmp_o, "optimizer.safetensors"),
        (tmp_s, "state.json"),
    ] {
        let dst = dir.join(name);
        std::fs::rename(&tmp, &dst).map_err(|e| Error::io(&dst, e))?;
    }
    Ok(())
}

/// Load the checkpoint in `dir` into `vars` and `opt`; `None` when there is none.
///
/// A checkpoint of another config or another number of examples is an error naming
/// the difference (it would not resume the same run).
pub fn load(
    dir: &Path,
    vars: &VarMap,
    opt: &mut AdamW,
    cfg: &TrainConfig,
    examples: usize,
) -> Result<Option<TrainState>> {
    let state_path = dir.join("state.json");
    let Some(state) = read_state(dir)? else {
        return Ok(None);
    };
    if &state.config != cfg {
        return Err(Error::bad_input(
            &state_path,
            format!(
                "checkpoint of another config ({:?}); delete the directory to start over",
                state.config
            ),
        ));
    }
    if state.examples != examples {
        return Err(Error::bad_input(
            &state_path,
            format!(
                "checkpoint of {} examples, the data has {examples}",
                state.examples
            ),
        ));
    }
    let w = dir.join("weights.safetensors");
    let saved = candle_core::safetensors::load(&w, &candle_core::Device::Cpu)
        .map_err(|e| Error::bad_input(&w, format!("loading weights: {e}")))?;
    let data = vars
        .data()
        .lock()
        .map_err(|_| Error::param("vars", "poisoned lock"))?;
    for (name, var) in data.iter() {
        let t = saved
            .get(name)
            .ok_or_else(|| Error::bad_input(&w, format!("no tensor `{name}`")))?;
        var.set(t)
            .map_err(|e| Error::bad_input(&w, format!("`{name}`: {e}")))?;
    }
    drop(data);
    opt.load(&dir.join("optimizer.safetensors"))?;
    opt.step_t = state.step;
    Ok(Some(state))
}

/// The training state saved in `dir` (its `state.json`) without loading any weights;
/// `None` when there is none.
pub fn read_state(dir: &Path) -> Result<Option<TrainState>> {
    let state_path = dir.join("state.json");
    if !state_path.exists() {
        return Ok(None);
    }
    let raw = std::fs::read(&state_path).map_err(|e| Error::io(&state_path, e))?;
    serde_json::from_slice(&raw)
        .map(Some)
        .map_err(|e| Error::bad_input(&state_path, format!("not a training state: {e}")))
}

/// A `done.json` record that names files inside its run folder.
pub trait RunRecord {
    /// The record's paths into its run folder (as written when it finished).
    fn run_paths(&mut self) -> Vec<&mut PathBuf>;
}

/// `path`, written under some run folder named like `run_dir`, moved under `run_dir`: the
/// components after the last one equal to `run_dir`'s name (the cache key) are kept. `None`
/// when `path` has no such component.
fn rebase(path: &Path, run_dir: &Path) -> Option<PathBuf> {
    let key = run_dir.file_name()?;
    let comps: Vec<_> = path.components().collect();
    let at = comps.iter().rposition(|c| c.as_os_str() == key)?;
    let mut p = run_dir.to_path_buf();
    p.extend(&comps[at + 1..]);
    Some(p)
}

/// A finished run of a train-once cache: the record in `run_dir/done.json` and, when the
/// run's training state is still there and readable, its log (the log is informative
/// only: a missing or unreadable one is `None`). `None` when the run has not finished.
///
/// A recorded path that runs through a folder named like `run_dir` (the cache key) is moved
/// under `run_dir`, the folder the record was found in: a cache reached through another
/// checkout's `data/cache` link (which may since have been deleted) or moved as a whole
/// still loads. A path without that name is kept as written.
pub fn read_done<T: DeserializeOwned + RunRecord>(
    run_dir: &Path,
) -> Result<Option<(T, Option<TrainLog>)>> {
    let done = run_dir.join("done.json");
    if !done.exists() {
        return Ok(None);
    }
    let raw = std::fs::read(&done).map_err(|e| Error::io(&done, e))?;
    let mut record: T =
        serde_json::from_slice(&raw).map_err(|e| Error::bad_input(&done, e.to_string()))?;
    for path in record.run_paths() {
        if let Some(p) = rebase(path, run_dir) {
            *path = p;
        }
    }
    let log = read_state(&run_dir.join("state"))
        .ok()
        .flatten()
        .map(|s| s.log);
    Ok(Some((record, log)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorded_paths_move_under_the_folder_the_record_is_in() {
        let run = Path::new("/cache/readers/abc123");
        for (written, under_run) in [
            // Written through another checkout: the components after the key are kept.
            ("/gone/data/cache/readers/abc123/model", "model"),
            (
                "/x/abc123/partial-50/model.safetensors",
                "partial-50/model.safetensors",
            ),
            // The key twice: the last one is the run folder.
            ("/abc123/cache/abc123/model", "model"),
            // Relative paths too.
            ("data/cache/readers/abc123/model", "model"),
        ] {
            assert_eq!(
                rebase(Path::new(written), run),
                Some(run.join(under_run)),
                "{written}"
            );
        }
        // A path without the key is not moved.
        assert_eq!(rebase(Path::new("/elsewhere/model"), run), None);
    }
}
