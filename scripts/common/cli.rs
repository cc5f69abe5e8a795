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

/// `--questions`, `--reader`: the options of the LLM report reproductions.
#[derive(clap::Args, Debug, Clone)]
pub struct ReproFlags {
    /// A seeded sample of this many questions per system (0: every question; default: the
    /// scale's).
    #[arg(long)]
    pub questions: Option<usize>,
    /// Reader model asset(s); one set of systems each (default: the 1.5B Qwen).
    #[arg(long = "reader")]
    pub readers: Vec<String>,
}

impl ReproFlags {
    /// Apply these flags and `study`'s test options to `params`.
    #[allow(dead_code)] // compiled into every binary that includes this file, used by some
    pub fn apply(&self, study: &StudyFlags, params: &mut workbench::study::repro::ReproParams) {
        if let Some(q) = self.questions {
            params.questions = Some(q);
        }
        if !self.readers.is_empty() {
            params.readers = self.readers.clone();
        }
        study.override_tests(&mut params.trials, &mut params.seed);
    }
}
