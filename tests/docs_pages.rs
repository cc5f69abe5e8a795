//! The documentation's checks:
//! - `grade readme --check / --write` over README.md and docs/*.md, through the binary, in
//!   a throw-away project: a stale table in a docs page fails the check (exit status 1)
//!   with the page named, `--write` rewrites that page only, and the check then passes;
//! - the README's Rust example is `examples/bm25_quickstart.rs`, which compiles with the
//!   tests;
//! - every relative link of README.md and docs/*.md points at a file that exists.

use std::path::Path;
use std::process::{Command, Output};

const CONDITIONS: &str = r#"
[[result]]
name = "exp"
binary = "exp_bin"
what = "a test experiment"

[[readme]]
id = "exp"
result = "exp"
file = "metrics.csv"
"#;

const METRICS: &str = "system,nDCG@10\nbm25,0.7337\ndense,0.7980\n";

const README: &str = "# Project\n\nResults: [docs/results.md](docs/results.md).\n";

const STALE_PAGE: &str = "# Results\n\n<!-- generated:exp -->\n\n| system | nDCG@10 |\n|---|---|\n| bm25 | 0.7000 |\n\n<!-- /generated:exp -->\n\nEnd.\n";

/// `grade --conditions … --results … readme ARGS` with the project as its root.
fn grade(root: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_grade"))
        .env("WORKBENCH_ROOT", root)
        .arg("--conditions")
        .arg(root.join("expected.toml"))
        .arg("--results")
        .arg(root.join("results"))
        .arg("readme")
        .args(args)
        .output()
        .unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn stale_table_in_a_docs_page_fails_the_check_and_names_the_page() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    std::fs::create_dir_all(root.join("results").join("exp")).unwrap();
    std::fs::create_dir_all(root.join("docs")).unwrap();
    std::fs::write(root.join("expected.toml"), CONDITIONS).unwrap();
    std::fs::write(
        root.join("results").join("exp").join("metrics.csv"),
        METRICS,
    )
    .unwrap();
    std::fs::write(root.join("README.md"), README).unwrap();
    let page = root.join("docs").join("results.md");
    std::fs::write(&page, STALE_PAGE).unwrap();

    let check = grade(root, &["--check"]);
    let out = stdout(&check);
    assert_eq!(check.status.code(), Some(1), "{out}");
    assert!(
        out.contains("docs/results.md: table `exp`: OUT OF DATE"),
        "{out}"
    );
    assert!(out.contains("- | bm25 | 0.7000 |"), "{out}");
    assert!(out.contains("+ | bm25 | 0.7337 |"), "{out}");
    assert!(
        out.contains("differ from the results, in docs/results.md"),
        "{out}"
    );

    let write = grade(root, &["--write"]);
    assert_eq!(write.status.code(), Some(0), "{}", stdout(&write));
    let text = std::fs::read_to_string(&page).unwrap();
    assert!(text.contains("| dense | 0.7980 |"), "{text}");
    assert!(
        text.starts_with("# Results\n") && text.ends_with("End.\n"),
        "{text}"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("README.md")).unwrap(),
        README
    );

    let again = grade(root, &["--check"]);
    assert_eq!(again.status.code(), Some(0), "{}", stdout(&again));
    assert!(
        stdout(&again).contains("2 page(s) checked"),
        "{}",
        stdout(&again)
    );

    // A table the conditions describe that no page holds is an error (exit status 2).
    std::fs::write(&page, "# Results\n\nNo table.\n").unwrap();
    let missing = grade(root, &["--check"]);
    let err = String::from_utf8_lossy(&missing.stderr);
    assert_eq!(missing.status.code(), Some(2), "{err}");
    assert!(
        err.contains("`exp`") && err.contains("docs/results.md"),
        "{err}"
    );
}

/// The README quotes `examples/bm25_quickstart.rs` from its first `use` to its end.
#[test]
fn readme_rust_example_is_the_compiled_example() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let example = std::fs::read_to_string(root.join("examples/bm25_quickstart.rs")).unwrap();
    let body = &example[example.find("use workbench").unwrap()..];
    let start = readme
        .find("```rust\nuse workbench::chunk")
        .expect("README has the example's code block")
        + "```rust\n".len();
    let end = start + readme[start..].find("```\n").unwrap();
    assert_eq!(
        &readme[start..end],
        body,
        "README.md's example differs from the file"
    );
}

/// Relative links `](target)` of README.md and docs/*.md resolve to existing files (the
/// part before any `#`); web links and pure anchors are not checked.
#[test]
fn relative_links_of_the_docs_resolve() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let pages = workbench::grade::pages(root).unwrap();
    assert!(pages.len() > 1, "{pages:?}");
    let mut broken = Vec::new();
    for page in &pages {
        let text = std::fs::read_to_string(page).unwrap();
        let dir = page.parent().unwrap();
        let mut rest = text.as_str();
        while let Some(i) = rest.find("](") {
            rest = &rest[i + 2..];
            let Some(end) = rest.find(')') else { break };
            let target = &rest[..end];
            let file = target.split('#').next().unwrap();
            if file.is_empty() || file.contains("://") || file.starts_with("mailto:") {
                continue;
            }
            if !dir.join(file).exists() {
                broken.push(format!("{}: {target}", page.display()));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}
