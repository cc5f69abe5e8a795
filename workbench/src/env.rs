//! Where the project lives and how much of a study runs: [`Env`] (the assets, caches
//! and result folders a run reads and writes, passed in instead of looked up) and
//! [`Scale`] (quick / default / paper). Both are re-exported by [`crate::study`].

use crate::assets::Assets;
use crate::results::ResultDir;
use crate::{paths, Error, Result};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// A study's checked parameters: `checked_params!(Dl19Valid, Dl19Params, "Checked [`Dl19Params`].")`
/// declares `pub struct Dl19Valid(Dl19Params)` with `Deref` to the parameters. Only the
/// module that invokes it can build one (the field is private to that module), so a value
/// of the type has been through that module's `check()`. (Every user is behind a crate
/// feature, hence the `allow` for a build without features.)
#[allow(unused_macros)]
macro_rules! checked_params {
    ($valid:ident, $params:ty, $doc:expr) => {
        #[doc = $doc]
        #[derive(Debug, Clone, PartialEq, serde::Serialize)]
        pub struct $valid($params);

        impl std::ops::Deref for $valid {
            type Target = $params;
            fn deref(&self) -> &$params {
                &self.0
            }
        }
    };
}
#[allow(unused_imports)]
pub(crate) use checked_params;

/// How much of a study runs. Every scale runs the same code; only sizes differ.
///
/// | scale | what |
/// |---|---|
/// | `quick` | smaller question sets and sub-corpora, trained models from short recipes: every figure and table in minutes |
/// | `default` | the sizes the published tables of this workbench use |
/// | `paper` | the reports' own question counts (hours for the LLM studies) |
///
/// The scale is part of a study's parameters, so a result folder records it and a
/// result of one scale is never taken for another's ([`Scale::result_name`]).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Scale {
    /// Minutes per study.
    Quick,
    /// The workbench's published sizes.
    #[default]
    Default,
    /// The reports' own sizes.
    Paper,
}

impl Scale {
    /// Every scale, smallest first.
    pub const ALL: [Scale; 3] = [Scale::Quick, Scale::Default, Scale::Paper];

    /// `quick`, `default` or `paper`.
    pub fn name(self) -> &'static str {
        match self {
            Scale::Quick => "quick",
            Scale::Default => "default",
            Scale::Paper => "paper",
        }
    }

    /// The result folder name of study `base` at this scale: `base` at the default
    /// scale (the published results keep their names), `base-quick` / `base-paper`
    /// otherwise.
    pub fn result_name(self, base: &str) -> String {
        match self {
            Scale::Default => base.to_string(),
            other => format!("{base}-{}", other.name()),
        }
    }

    /// The scale named by the environment variable [`SCALE_VAR`] (`WORKBENCH_SCALE`),
    /// or `default` when it is unset: how a notebook follows the scale that
    /// `scripts/reproduce --scale S` ran (it sets the variable for the notebooks it
    /// executes). A value that is not a scale is an error naming the variable.
    pub fn from_env_or(default: Scale) -> Result<Scale> {
        match std::env::var(SCALE_VAR) {
            Ok(v) => v.trim().parse().map_err(|_| {
                Error::param(
                    SCALE_VAR,
                    format!("`{v}` is not a scale (quick, default, paper)"),
                )
            }),
            Err(std::env::VarError::NotPresent) => Ok(default),
            Err(std::env::VarError::NotUnicode(_)) => {
                Err(Error::param(SCALE_VAR, "the value is not UTF-8"))
            }
        }
    }

    /// Pick the value for this scale.
    pub fn pick<T>(self, quick: T, default: T, paper: T) -> T {
        match self {
            Scale::Quick => quick,
            Scale::Default => default,
            Scale::Paper => paper,
        }
    }
}

/// The environment variable [`Scale::from_env_or`] reads.
pub const SCALE_VAR: &str = "WORKBENCH_SCALE";

impl fmt::Display for Scale {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Scale {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "quick" => Ok(Scale::Quick),
            "default" => Ok(Scale::Default),
            "paper" => Ok(Scale::Paper),
            other => Err(Error::param(
                "scale",
                format!("`{other}` is not a scale (quick, default, paper)"),
            )),
        }
    }
}

/// Where a study finds its inputs and puts its outputs: the project root (relative
/// paths in configs), the asset manifest and caches, the derived caches (embeddings,
/// token stores, trained checkpoints) and the result folders. Passed to every study
/// instead of each call looking for the project itself.
#[derive(Debug, Clone)]
pub struct Env {
    /// Relative paths of configs and prompts resolve against this folder.
    pub root: PathBuf,
    /// Models and data sets.
    pub assets: Assets,
    /// Derived caches: `<cache>/<what>` (embeddings, readers, cross-encoders, colbert, …).
    pub cache: PathBuf,
    /// Result folders: `<results>/<name>/`.
    pub results: PathBuf,
}

impl Env {
    /// The checkout's environment: [`paths::project_root`], its `data/assets.toml`,
    /// `data/cache` and `data/results`.
    pub fn project() -> Result<Self> {
        Self::at(&paths::project_root()?)
    }

    /// The environment of the project at `root` (a folder holding `data/assets.toml`).
    pub fn at(root: &Path) -> Result<Self> {
        let manifest = root.join("data").join("assets.toml");
        if !manifest.is_file() {
            return Err(Error::bad_input(
                &manifest,
                "no asset manifest here: `Env::at` needs the project root (the folder holding data/assets.toml)",
            ));
        }
        let assets = Assets::from_manifest(
            &manifest,
            paths::hf_cache_dir(root),
            paths::mirror_dir(root),
            paths::wheel_dir(root),
        )?;
        Ok(Env {
            root: root.to_path_buf(),
            assets,
            cache: root.join("data").join("cache"),
            results: root.join("data").join("results"),
        })
    }

    /// `<cache>/<what>`.
    pub fn cache_dir(&self, what: &str) -> PathBuf {
        self.cache.join(what)
    }

    /// `path` if absolute, else `root/path`.
    pub fn resolve(&self, path: impl AsRef<Path>) -> PathBuf {
        let p = path.as_ref();
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.root.join(p)
        }
    }

    /// The result folder of study `base` at `scale` ([`Scale::result_name`]) for the
    /// resolved parameters `config`.
    pub fn result_dir(
        &self,
        base: &str,
        scale: Scale,
        config: &impl Serialize,
    ) -> Result<ResultDir> {
        let name = scale.result_name(base);
        ResultDir::at(self.results.join(&name), &name, config)
    }
}

/// What a study's `config.json` records: the checked parameters it ran with, the
/// sha256 of every input asset file, anything else that decides its numbers (`extra`:
/// cache keys of trained models, library defaults), and the sha256 of the program
/// that ran it (so a rebuilt program makes the result stale).
#[derive(Debug, Clone, Serialize)]
pub struct Resolved<'a, P: Serialize> {
    /// The checked parameters.
    pub params: &'a P,
    /// `(file, sha256)` of every input asset file.
    pub inputs: Vec<(String, String)>,
    /// Other inputs that decide the numbers.
    pub extra: serde_json::Value,
    /// sha256 of the running executable.
    pub program_sha256: String,
}

impl<'a, P: Serialize> Resolved<'a, P> {
    /// `params` with the checksums of the asset files of `assets` and the running
    /// executable's sha256.
    pub fn new<'n>(
        env: &Env,
        params: &'a P,
        assets: impl IntoIterator<Item = &'n str>,
        extra: serde_json::Value,
    ) -> Result<Self> {
        Ok(Resolved {
            params,
            inputs: env.assets.input_checksums(assets)?,
            extra,
            program_sha256: crate::results::executable_sha256()?,
        })
    }
}

/// Open the result folder of study `base` at `scale` for `resolved`: `None` when it is
/// fresh and `force` is false (its `summary_file` is printed instead), else the
/// experiment to write into ([`crate::results::Experiment`]).
pub fn start(
    env: &Env,
    base: &str,
    scale: Scale,
    resolved: &impl Serialize,
    force: bool,
    summary_file: &str,
) -> Result<Option<crate::results::Experiment>> {
    crate::results::Experiment::start_in(
        env.result_dir(base, scale, resolved)?,
        force,
        summary_file,
    )
}

/// What a study's result writes: its files, its Markdown summary (printed, and the file
/// shown when a fresh result is skipped) and the numbers `manifest.json` records.
pub trait Outputs {
    /// Write every output file into `out`'s staging folder.
    fn write(&self, out: &ResultDir) -> Result<()>;
    /// The tables as Markdown.
    fn markdown(&self) -> Result<String>;
    /// The numbers `manifest.json` records.
    fn summary(&self) -> Result<serde_json::Value>;
}

/// Run a study into its result folder: skip it when the folder of `base` at `scale` is
/// fresh for `resolved` (printing `summary_file`) unless `force`; otherwise `run` it,
/// write its outputs, print its Markdown and finish the folder. Returns the result when
/// it ran.
pub fn execute<R: Outputs>(
    env: &Env,
    base: &str,
    scale: Scale,
    resolved: &impl Serialize,
    force: bool,
    summary_file: &str,
    run: impl FnOnce() -> Result<R>,
) -> Result<Option<R>> {
    let Some(exp) = start(env, base, scale, resolved, force, summary_file)? else {
        return Ok(None);
    };
    let result = run()?;
    result.write(&exp.out)?;
    println!("{}", result.markdown()?);
    exp.finish(result.summary()?)?;
    Ok(Some(result))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_from_the_environment() {
        // The only test that sets the variable (tests run in threads of one process).
        std::env::set_var(SCALE_VAR, "quick");
        assert_eq!(Scale::from_env_or(Scale::Default).unwrap(), Scale::Quick);
        std::env::set_var(SCALE_VAR, "huge");
        let e = Scale::from_env_or(Scale::Default).unwrap_err().to_string();
        assert!(e.contains(SCALE_VAR) && e.contains("huge"), "{e}");
        std::env::remove_var(SCALE_VAR);
        assert_eq!(Scale::from_env_or(Scale::Paper).unwrap(), Scale::Paper);
    }

    #[test]
    fn scales_parse_print_and_name_results() {
        for s in Scale::ALL {
            assert_eq!(s.name().parse::<Scale>().unwrap(), s);
            assert_eq!(s.to_string(), s.name());
            let json = serde_json::to_string(&s).unwrap();
            assert_eq!(json, format!("\"{}\"", s.name()));
        }
        let err = "fast".parse::<Scale>().unwrap_err().to_string();
        assert!(err.contains("fast") && err.contains("quick"), "{err}");
        assert_eq!(
            Scale::Default.result_name("dl19-retrieval"),
            "dl19-retrieval"
        );
        assert_eq!(
            Scale::Quick.result_name("dl19-retrieval"),
            "dl19-retrieval-quick"
        );
        assert_eq!(Scale::Paper.result_name("x"), "x-paper");
        assert_eq!(Scale::Quick.pick(1, 2, 3), 1);
        assert_eq!(Scale::Paper.pick(1, 2, 3), 3);
    }

    #[test]
    fn env_needs_a_manifest_and_resolves_against_its_root() {
        let tmp = tempfile::tempdir().unwrap();
        let err = Env::at(tmp.path()).unwrap_err().to_string();
        assert!(err.contains("assets.toml"), "{err}");
        std::fs::create_dir_all(tmp.path().join("data")).unwrap();
        std::fs::write(tmp.path().join("data/assets.toml"), "[asset]\n").unwrap();
        let env = Env::at(tmp.path()).unwrap();
        assert_eq!(
            env.resolve("configs/x.toml"),
            tmp.path().join("configs/x.toml")
        );
        assert_eq!(
            env.cache_dir("embeddings"),
            tmp.path().join("data/cache/embeddings")
        );
        let r = env
            .result_dir("study", Scale::Quick, &serde_json::json!({"a": 1}))
            .unwrap();
        assert_eq!(r.dir, tmp.path().join("data/results/study-quick"));
        assert_eq!(r.name, "study-quick");
    }
}
