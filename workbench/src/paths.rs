//! Where things live: the project root, the asset cache, the mirror, the results.
//!
//! | what | default | override |
//! |---|---|---|
//! | project root | nearest ancestor of the working directory holding `data/assets.toml`, else the parent of this crate | `WORKBENCH_ROOT` |
//! | Hugging Face cache (hf-hub layout) | `<root>/data/cache/huggingface/hub` | `WORKBENCH_HF_CACHE`, then `HF_HUB_CACHE` |
//! | local mirror | `<root>/../shared/mirror` | `WORKBENCH_MIRROR` |
//! | downloaded wheels | `<root>/data/cache/wheels` | – |
//! | derived caches (embeddings, token stores, trained checkpoints) | `<root>/data/cache/<what>` | – |
//! | results | `<root>/data/results/<name>/` | – |

use crate::{Error, Result};
use std::path::{Path, PathBuf};

fn env_path(key: &str) -> Option<PathBuf> {
    std::env::var_os(key)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// The project root: the folder holding `data/assets.toml`.
pub fn project_root() -> Result<PathBuf> {
    if let Some(p) = env_path("WORKBENCH_ROOT") {
        return Ok(p);
    }
    let start = std::env::current_dir().map_err(|e| Error::io(".", e))?;
    for dir in start.ancestors() {
        if dir.join("data").join("assets.toml").is_file() {
            return Ok(dir.to_path_buf());
        }
    }
    // The crate sits at <root>/workbench, also when evcxr compiles it as a path dependency.
    let compiled = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    if compiled.join("data").join("assets.toml").is_file() {
        return Ok(compiled.canonicalize().unwrap_or(compiled));
    }
    Err(Error::NoProjectRoot { start })
}

/// The Hugging Face hub cache directory (the `…/hub` folder itself).
pub fn hf_cache_dir(root: &Path) -> PathBuf {
    env_path("WORKBENCH_HF_CACHE")
        .or_else(|| env_path("HF_HUB_CACHE"))
        .unwrap_or_else(|| cache_dir(root, "huggingface").join("hub"))
}

/// The local mirror of data files (`../shared/mirror` beside the checkout by default).
pub fn mirror_dir(root: &Path) -> PathBuf {
    env_path("WORKBENCH_MIRROR").unwrap_or_else(|| root.join("..").join("shared").join("mirror"))
}

/// `<root>/data/cache/<what>`: a cache the workbench derives itself (embeddings, token
/// stores, trained checkpoints). Every entry is keyed by what produced it.
pub fn cache_dir(root: &Path, what: &str) -> PathBuf {
    root.join("data").join("cache").join(what)
}

/// [`cache_dir`] under the [`project_root`].
pub fn project_cache_dir(what: &str) -> Result<PathBuf> {
    Ok(cache_dir(&project_root()?, what))
}

/// Where registry packages (wheels) that carry assets are downloaded to.
pub fn wheel_dir(root: &Path) -> PathBuf {
    cache_dir(root, "wheels")
}

/// `<root>/data/results/<name>`.
pub fn results_dir(root: &Path, name: &str) -> PathBuf {
    root.join("data").join("results").join(name)
}
