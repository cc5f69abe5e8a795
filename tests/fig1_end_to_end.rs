//! End-to-end: the Figure 1 binary on a generated corpus writes its outputs,
//! skips fresh results, and recomputes when a parameter changes.

mod common;

use std::process::Command;

fn leads_fixture() -> Vec<u8> {
    let para = |n: usize, w: &str| vec![w; n].join(" ");
    // Paragraph lengths: 5, 30, 250 | 21, 199, 200 | 20 → kept: 30, 21, 199 = 3 of 7.
    let docs = serde_json::json!({
        "Alpha": {"title": "Alpha", "extract": format!("{}\n{}\n{}", para(5, "a"), para(30, "b"), para(250, "c")), "description": "d", "topic": "Arts"},
        "Beta": {"title": "Beta", "extract": format!("{}\n\n{}\n{}", para(21, "x"), para(199, "y"), para(200, "z")), "description": "d", "topic": "History"},
        "Gamma": {"title": "Gamma", "extract": para(20, "g"), "description": "d", "topic": "Arts"}
    });
    serde_json::to_vec_pretty(&docs).unwrap()
}

fn run(p: &common::Project, extra: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_fig1_paragraph_lengths"))
        .args(["--corpora", "wiki-leads-en"])
        .args(extra)
        .env("WORKBENCH_ROOT", p.root())
        .env("WORKBENCH_HF_CACHE", p.cache())
        .env("WORKBENCH_MIRROR", p.mirror())
        .env("HF_HUB_OFFLINE", "1")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    text
}

#[test]
fn fig1_writes_outputs_and_skips_when_fresh() {
    let bytes = leads_fixture();
    let p = common::Project::new(&[(
        "wiki-leads-en",
        "dataset",
        "leads",
        "summaries_en-us.json",
        &bytes,
    )]);
    p.assets().fetch("wiki-leads-en").unwrap();

    let first = run(&p, &[]);
    let dir = p.root().join("data/results/fig1-paragraph-lengths");
    for f in [
        "fig1.png",
        "fig1.svg",
        "bins.csv",
        "counts.csv",
        "config.json",
        "manifest.json",
    ] {
        assert!(dir.join(f).is_file(), "missing {f}\n{first}");
    }
    let png = std::fs::read(dir.join("fig1.png")).unwrap();
    assert_eq!(&png[1..4], b"PNG");
    let counts = std::fs::read_to_string(dir.join("counts.csv")).unwrap();
    // corpus,articles,paragraphs,kept,too_short,too_long,...
    assert!(counts.contains("wiki-leads-en,3,7,3,2,2,"), "{counts}");
    let cfg: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("config.json")).unwrap()).unwrap();
    assert_eq!(cfg["params"]["min_words"], 21);
    assert_eq!(cfg["extra"]["filter"]["min_words"], 21);
    assert_eq!(cfg["inputs"][0][1], common::sha(&bytes));
    // Bins: the "kept" column sums to the kept count.
    let bins = std::fs::read_to_string(dir.join("bins.csv")).unwrap();
    let kept: usize = bins
        .lines()
        .skip(1)
        .map(|l| l.rsplit(',').next().unwrap().parse::<usize>().unwrap())
        .sum();
    assert_eq!(kept, 3);

    let second = run(&p, &[]);
    assert!(second.contains("fresh, skipped"), "{second}");

    let third = run(&p, &["--min-words", "5"]);
    assert!(!third.contains("fresh, skipped"), "{third}");
    let counts = std::fs::read_to_string(dir.join("counts.csv")).unwrap();
    assert!(counts.contains("wiki-leads-en,3,7,5,0,2,"), "{counts}");
}

#[test]
fn fig1_names_the_missing_asset() {
    let bytes = leads_fixture();
    let p = common::Project::new(&[(
        "wiki-leads-en",
        "dataset",
        "leads",
        "summaries_en-us.json",
        &bytes,
    )]);
    let out = Command::new(env!("CARGO_BIN_EXE_fig1_paragraph_lengths"))
        .args(["--corpora", "wiki-leads-en"])
        .env("WORKBENCH_ROOT", p.root())
        .env("WORKBENCH_HF_CACHE", p.cache())
        .env("HF_HUB_OFFLINE", "1")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("wiki-leads-en")
            && err.contains("fetch wiki-leads-en")
            && err.contains(&common::sha(&bytes)),
        "{err}"
    );
}
