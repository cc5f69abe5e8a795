//! Command-line options every study binary shares, declared once. A binary includes
//! this file with `#[path = "../common/cli.rs"] mod cli;` and flattens [`StudyFlags`]
//! into its own clap `Args`.

use workbench::study::Scale;

/// `--scale`, `--force`, `--trials`, `--seed`.
#[derive(clap::Args, Debug, Clone)]
pub struct StudyFlags {
    /// quick (minutes), default (the published tables) or paper (the reports' sizes).
    #[arg(long, default_value = "default")]
    pub scale: Scale,
    /// Recompute even if the result folder is fresh.
    #[arg(long)]
    pub force: bool,
    /// Trials of the randomisation and bootstrap tests (default: the study's).
    #[arg(long)]
    pub trials: Option<usize>,
    /// Seed of the significance tests (default: the study's).
    #[arg(long)]
    pub seed: Option<u64>,
}

impl StudyFlags {
    /// Set `trials` and `seed` when the flags give them.
    #[allow(dead_code)] // compiled into every binary that includes this file, used by some
    pub fn override_tests(&self, trials: &mut usize, seed: &mut u64) {
        if let Some(t) = self.trials {
            *trials = t;
        }
        if let Some(s) = self.seed {
            *seed = s;
        }
    }
}
