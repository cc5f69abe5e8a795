//! Result folders: `data/results/<name>/` holds an experiment's outputs, the
//! resolved configuration that produced them (`config.json`) and a manifest
//! (`manifest.json`) with each output's sha256.
//!
//! Outputs are written to `<name>.partial/` and moved into place by
//! [`ResultDir::finish`], so a run that fails half-way never destroys the
//! previous complete result.
//!
//! A folder is *fresh* when its `config.json` equals the configuration about to
//! run and every file in the manifest still has its recorded checksum; scripts
//! skip fresh results and redo everything else, so a changed parameter or a
//! deleted or edited output can never be mistaken for a valid result.

use crate::assets::sha256_file;
use crate::{paths, Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// sha256 of the running executable. Put it in a result's configuration so that
/// rebuilding the code that produced a result makes the result stale.
pub fn executable_sha256() -> Result<String> {
    let exe = std::env::current_exe().map_err(|e| Error::io("<current executable>", e))?;
    sha256_file(&exe)
}

/// What `manifest.json` records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Result name (the folder name).
    pub name: String,
    /// Output file name → sha256.
    pub outputs: BTreeMap<String, String>,
    /// Free-form summary numbers (counts, scores) for quick inspection.
    pub summary: serde_json::Value,
    /// `workbench` crate version that wrote it.
    pub workbench_version: String,
}

/// An experiment's output folder.
#[derive(Debug, Clone)]
pub struct ResultDir {
    /// Result name.
    pub name: String,
    /// The finished folder, `data/results/<name>`.
    pub dir: PathBuf,
    staging: PathBuf,
    config: serde_json::Value,
}

impl ResultDir {
    /// `data/results/<name>` under the project root, for this configuration.
    pub fn new(name: &str, config: &impl Serialize) -> Result<Self> {
        let root = paths::project_root()?;
        Self::at(paths::results_dir(&root, name), name, config)
    }

    /// A result folder at an explicit path.
    pub fn at(dir: PathBuf, name: &str, config: &impl Serialize) -> Result<Self> {
        let mut staging = dir.clone().into_os_string();
        staging.push(".partial");
        Ok(ResultDir {
            name: name.to_string(),
            dir,
            staging: PathBuf::from(staging),
            config: serde_json::to_value(config)?,
        })
    }

    /// Where to write an output file during a run (inside the staging folder).
    pub fn path(&self, file: &str) -> PathBuf {
        self.staging.join(file)
    }

    /// The staging folder outputs are written to during a run.
    pub fn out_dir(&self) -> &Path {
        &self.staging
    }

    /// Path of a finished output file.
    pub fn final_path(&self, file: &str) -> PathBuf {
        self.dir.join(file)
    }

    /// True when the folder holds outputs of exactly this configuration, unchanged.
    pub fn is_fresh(&self) -> bool {
        let read = |p: &Path| std::fs::read_to_string(p).ok();
        let Some(cfg) = read(&self.final_path("config.json"))
            .and_then(|s| serde_json::from_str::<serde_json::Value>(&s).ok())
        else {
            return false;
        };
        if cfg != self.config {
            return false;
        }
        let Some(m) = read(&self.final_path("manifest.json"))
            .and_then(|s| serde_json::from_str::<Manifest>(&s).ok())
        else {
            return false;
        };
        !m.outputs.is_empty()
            && m.outputs.iter().all(|(f, sha)| {
                sha256_file(&self.final_path(f)).ok().as_deref() == Some(sha.as_str())
            })
    }

    /// Create (or empty) the staging folder and write `config.json` into it.
    /// Call before writing outputs; the finished folder is untouched until [`finish`](Self::finish).
    pub fn begin(&self) -> Result<()> {
        if self.staging.exists() {
            std::fs::remove_dir_all(&self.staging).map_err(|e| Error::io(&self.staging, e))?;
        }
        std::fs::create_dir_all(&self.staging).map_err(|e| Error::io(&self.staging, e))?;
        let p = self.path("config.json");
        std::fs::write(&p, serde_json::to_string_pretty(&self.config)?)
            .map_err(|e| Error::io(&p, e))
    }

    /// Write `manifest.json` over every file now in the staging folder, then move
    /// the staging folder into place (replacing the previous result).
    pub fn finish(&self, summary: serde_json::Value) -> Result<Manifest> {
        let mut outputs = BTreeMap::new();
        let rd = std::fs::read_dir(&self.staging).map_err(|e| Error::io(&self.staging, e))?;
        for e in rd {
            let e = e.map_err(|e| Error::io(&self.staging, e))?;
            let n = e.file_name().to_string_lossy().to_string();
            if n != "manifest.json" && e.path().is_file() {
                outputs.insert(n, sha256_file(&e.path())?);
            }
        }
        let m = Manifest {
            name: self.name.clone(),
            outputs,
            summary,
            workbench_version: env!("CARGO_PKG_VERSION").to_string(),
        };
        let p = self.path("manifest.json");
        std::fs::write(&p, serde_json::to_string_pretty(&m)?).map_err(|e| Error::io(&p, e))?;
        if self.dir.exists() {
            std::fs::remove_dir_all(&self.dir).map_err(|e| Error::io(&self.dir, e))?;
        }
        std::fs::rename(&self.staging, &self.dir).map_err(|e| Error::io(&self.dir, e))?;
        Ok(m)
    }
}

/// The frame every experiment binary runs in: skip when the result is fresh,
/// otherwise stage the outputs, and on [`Experiment::finish`] swap them into
/// place and report the elapsed time.
///
/// ```no_run
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use workbench::results::Experiment;
/// let config = serde_json::json!({"k": 10});
/// let Some(exp) = Experiment::start("demo", &config, false, "metrics.md")? else {
///     return Ok(()); // fresh: the previous metrics.md was printed
/// };
/// std::fs::write(exp.out.path("metrics.md"), "| a |\n")?;
/// exp.finish(serde_json::json!({"rows": 1}))?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Experiment {
    /// The result folder being written.
    pub out: ResultDir,
    started: std::time::Instant,
}

impl Experiment {
    /// Open `data/results/<name>/` for `config`. When it is fresh and `force` is
    /// false, print that it was skipped and the contents of its `summary_file`
    /// (if present), and return `None`. Otherwise begin staging and return the
    /// experiment.
    pub fn start(
        name: &str,
        config: &impl Serialize,
        force: bool,
        summary_file: &str,
    ) -> Result<Option<Self>> {
        Self::start_in(ResultDir::new(name, config)?, force, summary_file)
    }

    /// [`Experiment::start`] with an explicit result folder.
    pub fn start_in(out: ResultDir, force: bool, summary_file: &str) -> Result<Option<Self>> {
        if out.is_fresh() && !force {
            println!(
                "{}: fresh, skipped ({}); pass --force to redo",
                out.name,
                out.dir.display()
            );
            if let Ok(text) = std::fs::read_to_string(out.final_path(summary_file)) {
                println!("{text}");
            }
            return Ok(None);
        }
        out.begin()?;
        Ok(Some(Experiment {
            out,
            started: std::time::Instant::now(),
        }))
    }

    /// Seconds since [`Experiment::start`].
    pub fn elapsed_seconds(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    /// Finish the result folder with `summary` (plus `total_seconds`, added
    /// when `summary` is a JSON object) and print where it went.
    pub fn finish(self, mut summary: serde_json::Value) -> Result<Manifest> {
        let seconds = self.elapsed_seconds();
        if let Some(obj) = summary.as_object_mut() {
            obj.entry("total_seconds").or_insert(seconds.into());
        }
        let m = self.out.finish(summary)?;
        println!("wrote {} in {seconds:.1} s", self.out.dir.display());
        Ok(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn freshness_tracks_config_and_outputs() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("r");
        let r = ResultDir::at(dir.clone(), "r", &serde_json::json!({"k": 1})).unwrap();
        assert!(!r.is_fresh());
        r.begin().unwrap();
        std::fs::write(r.path("out.csv"), "a,b\n").unwrap();
        r.finish(serde_json::json!({})).unwrap();
        assert!(r.is_fresh());
        let other = ResultDir::at(dir.clone(), "r", &serde_json::json!({"k": 2})).unwrap();
        assert!(!other.is_fresh(), "a different config must not be fresh");
        std::fs::write(r.final_path("out.csv"), "edited\n").unwrap();
        assert!(!r.is_fresh(), "an edited output must not be fresh");
        // A failed re-run (begin without finish) leaves the previous result in place.
        r.begin().unwrap();
        assert!(r.final_path("out.csv").is_file());
        assert!(r.final_path("manifest.json").is_file());
    }

    #[test]
    fn experiment_skips_fresh_results_unless_forced() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("e");
        let cfg = serde_json::json!({"k": 1});
        let open = |force| {
            Experiment::start_in(
                ResultDir::at(dir.clone(), "e", &cfg).unwrap(),
                force,
                "m.md",
            )
            .unwrap()
        };
        let e = open(false).expect("nothing there yet: must run");
        std::fs::write(e.out.path("m.md"), "x").unwrap();
        let m = e.finish(serde_json::json!({"n": 1})).unwrap();
        assert!(m.summary["total_seconds"].as_f64().unwrap() >= 0.0);
        assert!(open(false).is_none(), "fresh: must skip");
        assert!(open(true).is_some(), "--force must redo");
    }
}
