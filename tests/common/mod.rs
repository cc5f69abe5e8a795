//! Fixtures shared by the integration tests: a throw-away project root with its
//! own `data/assets.toml`, mirror and cache, so tests never touch the real cache.
#![allow(dead_code)]

use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// sha256 of bytes, lowercase hex.
pub fn sha(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A temporary project: `root/data/assets.toml`, `root/mirror/<folder>/…`, `root/cache`.
pub struct Project {
    pub tmp: tempfile::TempDir,
}

impl Project {
    /// Build a project whose manifest lists one mirror-sourced asset per `(name, kind, folder, file, bytes)`.
    pub fn new(assets: &[(&str, &str, &str, &str, &[u8])]) -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        std::fs::create_dir_all(root.join("data")).unwrap();
        let mut toml = String::new();
        for (name, kind, folder, file, bytes) in assets {
            let dir = root.join("mirror").join(folder);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join(file), bytes).unwrap();
            toml += &format!(
                "[asset.{name}]\nkind = \"{kind}\"\nhf_id = \"test-org/{name}\"\nsnapshot = \"fixture\"\n\
                 license = \"test\"\ndescription = \"fixture\"\nsource = {{ type = \"mirror\", folder = \"{folder}\" }}\n\
                 [asset.{name}.files]\n\"{file}\" = {{ sha256 = \"{}\", from = \"{file}\" }}\n\n",
                sha(bytes)
            );
        }
        std::fs::write(root.join("data").join("assets.toml"), toml).unwrap();
        Project { tmp }
    }

    pub fn root(&self) -> &Path {
        self.tmp.path()
    }

    pub fn cache(&self) -> PathBuf {
        self.root().join("cache")
    }

    pub fn mirror(&self) -> PathBuf {
        self.root().join("mirror")
    }

    pub fn assets(&self) -> workbench::assets::Assets {
        let mut a = workbench::assets::Assets::from_manifest(
            &self.root().join("data").join("assets.toml"),
            self.cache(),
            self.mirror(),
            self.root().join("wheels"),
        )
        .unwrap();
        a.offline = true;
        a
    }
}

/// The test venv's python: `$WORKBENCH_VENV/bin/python`, else `$WORKBENCH_HOME/venv`, else
/// `~/.cache/rag-workbench/venv` (as `scripts/lib.sh`). `needs` says what the test uses it
/// for, in the failure message when it is missing.
pub fn venv_python(needs: &str) -> PathBuf {
    let venv = std::env::var_os("WORKBENCH_VENV")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("WORKBENCH_HOME").map(|h| PathBuf::from(h).join("venv")))
        .or_else(|| {
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/rag-workbench/venv"))
        })
        .expect("neither WORKBENCH_VENV nor HOME is set: cannot find the test venv");
    let py = venv.join("bin/python");
    assert!(
        py.exists(),
        "no python at {}: {needs} needs the test venv. Run `bash scripts/test` once (its setup, \
         scripts/lib.sh ensure_python, creates the venv and installs it), or point \
         WORKBENCH_VENV at a venv that has it.",
        py.display()
    );
    py
}

/// The lower-cased words of more than three letters of `s` (the fake readers' test of
/// whether a passage is about the question).
pub fn words(s: &str) -> Vec<String> {
    s.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.len() > 3)
        .map(str::to_lowercase)
        .collect()
}
