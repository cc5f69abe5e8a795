//! The documentation's checks:
//! - `grade readme --check / --write` over README.md and docs/*.md, through the binary, in
//!   a throw-away project: a stale table in a docs page fails the check (exit status 1)
//!   with the page named, `--write` rewrites that page only, and the check then passes;
//!   `--block ID` renders that table only and refuses an id no page or condition has;
//! - the README's Rust example is `examples/bm25_quickstart.rs`, which compiles with the
//!   tests;
//! - every relative link of README.md and docs/*.md points at a file that exists;
//! - no measurement is typed by hand on a page: outside generated blocks and fenced code,
//!   README.md, docs/*.md and notebooks/README.md hold no measurement-looking number (a
//!   decimal, a number with a unit of time, speed, size or ratio, a duration such as
//!   `12m30s`) other than the parameters and names of [`ALLOWED`].

use regex::Regex;
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

/// A throw-away project in `root`: `conditions` as its expected.toml, the `exp` result's
/// metrics, README.md and `page_text` as docs/results.md, whose path it returns.
fn project(root: &Path, conditions: &str, page_text: &str) -> std::path::PathBuf {
    std::fs::create_dir_all(root.join("results").join("exp")).unwrap();
    std::fs::create_dir_all(root.join("docs")).unwrap();
    std::fs::write(root.join("expected.toml"), conditions).unwrap();
    std::fs::write(
        root.join("results").join("exp").join("metrics.csv"),
        METRICS,
    )
    .unwrap();
    std::fs::write(root.join("README.md"), README).unwrap();
    let page = root.join("docs").join("results.md");
    std::fs::write(&page, page_text).unwrap();
    page
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn stale_table_in_a_docs_page_fails_the_check_and_names_the_page() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let page = project(root, CONDITIONS, STALE_PAGE);

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

/// `--block ID` renders that table only: the other result tables stay as they are (their
/// result folders may be absent), and an id no page holds or no condition names fails.
#[test]
fn block_renders_one_table_and_keeps_the_others() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let conditions = format!(
        "{CONDITIONS}\n[[result]]\nname = \"exp2\"\nbinary = \"exp2_bin\"\nwhat = \"another\"\n\n[[readme]]\nid = \"exp2\"\nresult = \"exp2\"\nfile = \"metrics.csv\"\n"
    );
    let other = "<!-- generated:exp2 -->\n\n| system | nDCG@10 |\n|---|---|\n| old | 0.1000 |\n\n<!-- /generated:exp2 -->\n";
    let page = project(root, &conditions, &format!("{STALE_PAGE}\n{other}"));

    // Without --block the missing result folder of `exp2` stops the check.
    let all = grade(root, &["--check"]);
    assert_eq!(all.status.code(), Some(2), "{}", stdout(&all));

    let check = grade(root, &["--check", "--block", "exp"]);
    let out = stdout(&check);
    assert_eq!(check.status.code(), Some(1), "{out}");
    assert!(out.contains("table `exp`: OUT OF DATE"), "{out}");
    assert!(out.contains("table `exp2`: kept"), "{out}");

    let write = grade(root, &["--write", "--block", "exp"]);
    assert_eq!(write.status.code(), Some(0), "{}", stdout(&write));
    let text = std::fs::read_to_string(&page).unwrap();
    assert!(text.contains("| dense | 0.7980 |"), "{text}");
    assert!(text.contains(other), "{text}");

    // An id that no condition names, or that no page considered holds, is an error.
    let unknown = grade(root, &["--check", "--block", "nope"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("--block nope"));
    let elsewhere = grade(root, &["--check", "--block", "exp", "--page", "README.md"]);
    assert_eq!(elsewhere.status.code(), Some(2), "{}", stdout(&elsewhere));
    assert!(String::from_utf8_lossy(&elsewhere.stderr).contains("--block exp"));
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

/// Numbers a page may state outside generated blocks: parameters, definitions, names and
/// figures quoted from the original reports, each matched with its context (the number alone
/// is never enough). Everything measured here belongs in a generated block (results, records,
/// `data/findings/`), which `grade readme --check` compares with its source.
const ALLOWED: &[(&str, &str)] = &[
    // BM25 parameters (Lucene's k1 0.9, b 0.4; tantivy's k1 1.2, b 0.75).
    (r"\bk1[ =]+\d+(\.\d+)?", "BM25 parameter k1"),
    (r"\bb[ =]+\d*\.\d+", "BM25 parameter b"),
    (
        r"BM25Similarity\(\d+(\.\d+)?, \d+(\.\d+)?\)",
        "Lucene's BM25 constructor",
    ),
    // Sampling and training parameters.
    (r"temperature \d+(\.\d+)?", "LLM sampling temperature"),
    (r"clipping \d+(\.\d+)?", "gradient-norm clipping"),
    (r"fusion \d+(\.\d+)? / \d+(\.\d+)?", "hybrid fusion weights"),
    // Decision thresholds and significance levels (definitions, not results).
    (r"P\(Yes\) [>≥] \d+(\.\d+)?", "LLM-judge threshold"),
    (r"p̃? < \d+(\.\d+)?( / \d+(\.\d+)?)?", "significance level"),
    (r"α = \d+(\.\d+)?", "significance level"),
    (r"power \d+(\.\d+)?", "statistical power of the MDE"),
    (
        r"(above|more than) 1\.3× slower",
        "the speed check's threshold (notebook 02, tests/llm_user_path.rs)",
    ),
    // A floor's margin over another row (data/expected.toml's `by`).
    (
        r"by at least \d+\.\d+",
        "a floor's margin (data/expected.toml)",
    ),
    // grade's tolerances (docs/grading.md defines them).
    (
        r"\d+\.\d+, or \d+\.\d+ on percentages|\d+\.\d+ \(\d+\.\d+ on percentages\)|\d+\.\d+ for a model the run trains",
        "grade's tolerances",
    ),
    // A weight format's size (a definition: bytes per block over values per block).
    (
        r"\d+\.\d+ bits per weight",
        "a quantised format's bits per weight",
    ),
    // Names with a version in them.
    (r"SQuAD 2\.0", "data set name"),
    (r"Apache-2\.0", "licence name"),
    (r"Llama 3\.1", "model name"),
    (r"\(\d+\.\d+ or newer\)", "minimum Rust toolchain"),
    (
        r"`[\w-]+` \(\d+\.\d+",
        "a dependency's version (docs/dependencies.md)",
    ),
    // Gold answers of a data set, quoted (docs/methods.md, Bamboogle's scoring caveats).
    (r#""10\.8" and "108""#, "a gold answer quoted"),
    // Figures the original reports printed (quoted, not measured here).
    (
        r"report's figures are naive \d\.\d+ and enhanced \d\.\d+",
        "report 004's own context precision",
    ),
];

/// Units that make a number a measurement (time, speed, size, counts of faults); `×`
/// (a ratio) and `%` after a decimal are matched beside them.
const UNITS: &str = r"(?:ms|µs|us|ns|s|sec|seconds?|min|minutes?|h|hours?|[a-z]+/s|GB|MB|KB|GiB|MiB|KiB|page faults)";

/// Each measurement-looking number of a page's prose (outside generated blocks and fenced
/// code; link targets and web addresses skipped), once the [`ALLOWED`] phrases are blanked:
/// `(line number, the number with its unit, the line)`.
fn hand_typed_measurements(text: &str) -> Vec<(usize, String, String)> {
    let allowed: Vec<Regex> = ALLOWED
        .iter()
        .map(|(r, _)| Regex::new(r).unwrap())
        .collect();
    let skipped = Regex::new(r"\]\([^)]*\)|https?://\S+").unwrap();
    // A number with a unit or `×`, a decimal (with `%`), or a duration (12m30s, 2h00m).
    let number = Regex::new(&format!(
        r"\d(?:[\d,]*\d)?(?:\.\d+)?(?:\s?{UNITS}\b|×)|\d(?:[\d,]*\d)?\.\d+(?:\s?%)?|\d+h\d\dm|\d+m\d\ds"
    ))
    .unwrap();
    let unit_after = Regex::new(&format!(r"^\s?{UNITS}\b")).unwrap();
    let mut out = Vec::new();
    let (mut fence, mut generated) = (false, false);
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fence = !fence;
            continue;
        }
        if line.contains("<!-- /generated:") {
            generated = false;
            continue;
        }
        if line.contains("<!-- generated:") {
            generated = true;
        }
        if fence || generated {
            continue;
        }
        let mut prose = skipped.replace_all(line, " ").into_owned();
        for re in &allowed {
            prose = re
                .replace_all(&prose, |c: &regex::Captures| " ".repeat(c[0].len()))
                .into_owned();
        }
        for m in number.find_iter(&prose) {
            let before = prose[..m.start()].chars().next_back();
            let after = &prose[m.end()..];
            let next = after.chars().next();
            // Part of a word or a version (Qwen2.5, 0.22.0, v1.2, 8.8M-passage, 1.5B).
            if before.is_some_and(|c| c.is_alphanumeric() || c == '.') {
                continue;
            }
            if next.is_some_and(|c| c.is_ascii_digit())
                || (next == Some('.') && after[1..].starts_with(|c: char| c.is_ascii_digit()))
            {
                continue;
            }
            let word_after = next.is_some_and(char::is_alphanumeric);
            if word_after && !unit_after.is_match(after) {
                continue;
            }
            out.push((i + 1, m.as_str().to_string(), line.to_string()));
        }
    }
    out
}

/// The pages the scanner reads: README.md, docs/*.md and notebooks/README.md.
fn scanned_pages(root: &Path) -> Vec<std::path::PathBuf> {
    let mut pages = workbench::grade::pages(root).unwrap();
    pages.push(root.join("notebooks").join("README.md"));
    pages
}

#[test]
fn pages_state_no_hand_typed_measurement() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut found = Vec::new();
    for page in scanned_pages(root) {
        let text = std::fs::read_to_string(&page).unwrap();
        let name = page.strip_prefix(root).unwrap().display().to_string();
        for (line, number, _) in hand_typed_measurements(&text) {
            found.push(format!("{name}:{line}: {number}"));
        }
    }
    assert!(
        found.is_empty(),
        "measurements typed by hand outside generated blocks (generate them from a result or \
         record, point to the generated table, or, for a parameter or a name, add a reviewed \
         entry to ALLOWED in tests/docs_pages.rs):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_scanner_finds_planted_measurements_and_allows_parameters() {
    let page = "\
# Page

Training took 476 s on 2 cores, MRR@10 0.8543, 45.6 tok/s, 2.93× faster, 12m30s in all,
and 35.0% kept.

BM25 with k1 0.9, b 0.4; temperature 0.4; P(Yes) > 0.5; α = 0.05; `evcxr_jupyter` 0.22.0;
Qwen2.5-Coder 1.5B on SQuAD 2.0 (500 questions, seed 42, 2026-11-25).

<!-- generated:t -->

| system | MRR@10 | s |
|---|---|---|
| a | 0.8543 | 476 |

<!-- /generated:t -->

```bash
FUZZ_CASES=50000 sleep 1.5
```

See [the table](report003.md#d-0.5) at https://example.org/v1.5/x.
";
    let found = hand_typed_measurements(page);
    let numbers: Vec<(usize, &str)> = found.iter().map(|(l, n, _)| (*l, n.as_str())).collect();
    assert_eq!(
        numbers,
        vec![
            (3, "476 s"),
            (3, "0.8543"),
            (3, "45.6 tok/s"),
            (3, "2.93×"),
            (3, "12m30s"),
            (4, "35.0%"),
        ]
    );
}
