//! Report 001's question groups (Tables 3 and 4), per-system overall scores with
//! abstentions counted apart, and paired comparisons, computed with polars group-bys
//! over one per-question table (feature `parquet`).
//!
//! ## The group of a question ([`question_group`])
//!
//! Report 001 sorted its questions alphabetically and merged them into eight groups,
//! written as globs: `Misc.`, `In *`, `What *`, `What is *`, `When *`, `Where *`,
//! `Which *`, `Who *`. The rule here reads those globs literally, case-insensitively,
//! after trimming leading whitespace and quote marks:
//!
//! 1. the question starts with the words `what is` → **What is**;
//! 2. else its first word (up to the first whitespace, with trailing `,` `:` `?`
//!    removed) is `in`, `what`, `when`, `where`, `which` or `who` → **In**, **What**,
//!    **When**, **Where**, **Which**, **Who**;
//! 3. else → **Misc.** (`How …`, `Whose …`, `What's …`, `Name …`, statements).
//!
//! So `Who's …` and `Whose …` are Misc. (the glob `Who *` needs a space after `Who`),
//! as is `What's …` (the glob `What is *` needs the two words). A question set can
//! override the rule per question with a `group` field (`load::question_set`).
//!
//! ## The per-question table ([`per_question_frame`])
//!
//! One row per (system, question): `system` (str), `question_id` (str), `group` (str),
//! `group_rank` (u32, the position in [`GROUPS`], groups from a file after them),
//! `em`, `f1` (f64, 0–1, SQuAD's), `abstained` (bool). Every other table is a polars
//! query over it:
//!
//! - [`overall`]: per system, `questions`, `em`, `f1` (percent, over every question:
//!   an abstention scores what "Not found" scores against the golds, normally 0),
//!   `answered`, `abstained`, and `em_answered`, `f1_answered` (percent, over the
//!   questions it did not abstain on; null when it abstained on all);
//! - [`by_group`]: the same per (group, system), groups in report 001's order;
//! - [`winners`]: per group, the system(s) with the highest F1 (Table 4); ties name
//!   every tied system, joined by `" = "`. A tie is decided at the precision the table
//!   prints (`decimals` places, [`tied_best`]), not by exact float equality: two means
//!   that print the same are a tie.

#[cfg(feature = "parquet")]
use crate::{Error, Result};
#[cfg(feature = "parquet")]
use polars::prelude::*;
use serde::{Deserialize, Serialize};
#[cfg(feature = "parquet")]
use std::collections::BTreeMap;

/// Report 001's groups, in its tables' order.
pub const GROUPS: [&str; 8] = [
    "Misc.", "In", "What", "What is", "When", "Where", "Which", "Who",
];

/// The group of a question under report 001's rule (see the [module docs](self)).
pub fn question_group(question: &str) -> &'static str {
    let q = question
        .trim_start_matches(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '“' | '‘'))
        .to_lowercase();
    let mut words = q.split_whitespace();
    let first = words.next().unwrap_or("").trim_end_matches([',', ':', '?']);
    if first == "what" && words.next() == Some("is") {
        return "What is";
    }
    match first {
        "in" => "In",
        "what" => "What",
        "when" => "When",
        "where" => "Where",
        "which" => "Which",
        "who" => "Who",
        _ => "Misc.",
    }
}

/// One scored answer of one system: a row of the per-question table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QuestionScore {
    /// System name (`"dense"`, `"closed-book"`).
    pub system: String,
    /// Question id.
    pub question_id: String,
    /// Question group ([`question_group`], or the question set's own `group`).
    pub group: String,
    /// Exact match, 0 or 1.
    pub em: f64,
    /// Token F1, 0–1.
    pub f1: f64,
    /// Whether the answer was an abstention.
    pub abstained: bool,
}

#[cfg(feature = "parquet")]
fn pe(e: PolarsError) -> Error {
    Error::Table {
        path: "<per-question table>".into(),
        message: e.to_string(),
    }
}

#[cfg(feature = "parquet")]
/// The per-question DataFrame of `rows` (columns in the [module docs](self)).
/// Errors: no rows ([`Error::Empty`]); a (system, question) pair given twice.
pub fn per_question_frame(rows: &[QuestionScore]) -> Result<DataFrame> {
    if rows.is_empty() {
        return Err(Error::Empty("no per-question scores".into()));
    }
    let mut seen = std::collections::HashSet::new();
    for r in rows {
        if !seen.insert((&r.system, &r.question_id)) {
            return Err(Error::param(
                "rows",
                format!(
                    "system `{}` scores question `{}` twice",
                    r.system, r.question_id
                ),
            ));
        }
    }
    let extra: BTreeMap<&str, u32> = rows
        .iter()
        .filter(|r| !GROUPS.contains(&r.group.as_str()))
        .map(|r| r.group.as_str())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .enumerate()
        .map(|(i, g)| (g, GROUPS.len() as u32 + i as u32))
        .collect();
    let rank = |g: &str| {
        GROUPS
            .iter()
            .position(|x| *x == g)
            .map(|p| p as u32)
            .unwrap_or_else(|| extra[g])
    };
    df!(
        "system" => rows.iter().map(|r| r.system.as_str()).collect::<Vec<_>>(),
        "question_id" => rows.iter().map(|r| r.question_id.as_str()).collect::<Vec<_>>(),
        "group" => rows.iter().map(|r| r.group.as_str()).collect::<Vec<_>>(),
        "group_rank" => rows.iter().map(|r| rank(&r.group)).collect::<Vec<_>>(),
        "em" => rows.iter().map(|r| r.em).collect::<Vec<_>>(),
        "f1" => rows.iter().map(|r| r.f1).collect::<Vec<_>>(),
        "abstained" => rows.iter().map(|r| r.abstained).collect::<Vec<_>>(),
    )
    .map_err(pe)
}

#[cfg(feature = "parquet")]
fn score_aggs() -> Vec<Expr> {
    let answered = col("abstained").not();
    vec![
        len().cast(DataType::UInt32).alias("questions"),
        (col("em").mean() * lit(100.0)).alias("em"),
        (col("f1").mean() * lit(100.0)).alias("f1"),
        answered
            .clone()
            .cast(DataType::UInt32)
            .sum()
            .alias("answered"),
        col("abstained")
            .cast(DataType::UInt32)
            .sum()
            .alias("abstained"),
        (col("em").filter(answered.clone()).mean() * lit(100.0)).alias("em_answered"),
        (col("f1").filter(answered).mean() * lit(100.0)).alias("f1_answered"),
    ]
}

#[cfg(feature = "parquet")]
/// Per system: questions, EM, F1 (percent, all questions), answered, abstained,
/// answered-only EM and F1. Sorted by system name.
pub fn overall(per_question: &DataFrame) -> Result<DataFrame> {
    per_question
        .clone()
        .lazy()
        .group_by([col("system")])
        .agg(score_aggs())
        .sort(["system"], SortMultipleOptions::default())
        .collect()
        .map_err(pe)
}

#[cfg(feature = "parquet")]
/// Per (group, system): the columns of [`overall`], groups in report 001's order
/// (Table 3's rows), then systems by name.
pub fn by_group(per_question: &DataFrame) -> Result<DataFrame> {
    per_question
        .clone()
        .lazy()
        .group_by([col("group_rank"), col("group"), col("system")])
        .agg(score_aggs())
        .sort(
            ["group_rank", "system"],
            SortMultipleOptions::default().with_maintain_order(true),
        )
        .drop(cols(["group_rank"]))
        .collect()
        .map_err(pe)
}

/// The systems that win one group of Table 4: those whose F1, printed with `decimals`
/// places (`format!("{:.decimals$}")`, as [`to_table`] prints it), equals the printed
/// best F1. Means of the same scores summed in another order differ in the last bits;
/// deciding at the printed precision makes a tie visible in the table a tie in the
/// winner column, and a sole winner always prints strictly higher than every other
/// system. `scores` are (system, F1); the winners come in the order given, with the
/// best F1. `None` when `scores` is empty or has no comparable (non-NaN) F1.
pub fn tied_best<'a>(scores: &[(&'a str, f64)], decimals: usize) -> Option<(Vec<&'a str>, f64)> {
    let best = scores
        .iter()
        .map(|&(_, f)| f)
        .filter(|f| !f.is_nan())
        .max_by(f64::total_cmp)?;
    let printed = format!("{best:.decimals$}");
    let names = scores
        .iter()
        .filter(|&&(_, f)| format!("{f:.decimals$}") == printed)
        .map(|&(s, _)| s)
        .collect();
    Some((names, best))
}

#[cfg(feature = "parquet")]
/// Per group, the system(s) with the highest F1 (Table 4): columns `group`, `winner`
/// (tied systems joined by `" = "`, by name), `f1` (percent, the best mean), `questions`.
/// Ties are decided at the precision the table prints, `decimals` places
/// ([`tied_best`]): pass the `decimals` given to [`to_table`].
pub fn winners(per_question: &DataFrame, decimals: usize) -> Result<DataFrame> {
    let table = per_question
        .clone()
        .lazy()
        .group_by([col("group_rank"), col("group"), col("system")])
        .agg([
            (col("f1").mean() * lit(100.0)).alias("f1"),
            len().cast(DataType::UInt32).alias("questions"),
        ])
        .sort(
            ["group_rank", "system"],
            SortMultipleOptions::default().with_maintain_order(true),
        )
        .collect()
        .map_err(pe)?;
    let groups = table
        .column("group")
        .map_err(pe)?
        .str()
        .map_err(pe)?
        .clone();
    let systems = table
        .column("system")
        .map_err(pe)?
        .str()
        .map_err(pe)?
        .clone();
    let f1s = table.column("f1").map_err(pe)?.f64().map_err(pe)?.clone();
    let ns = table
        .column("questions")
        .map_err(pe)?
        .u32()
        .map_err(pe)?
        .clone();
    // Rows of one group are adjacent (sorted by group rank, then system).
    // (system, mean F1, questions) of each row of a group.
    type Rows<'a> = Vec<(&'a str, f64, u32)>;
    let mut per_group: Vec<(String, Rows)> = Vec::new();
    for i in 0..table.height() {
        let g = groups.get(i).unwrap_or_default();
        let row = (
            systems.get(i).unwrap_or_default(),
            f1s.get(i).unwrap_or(f64::NAN),
            ns.get(i).unwrap_or(0),
        );
        match per_group.last_mut() {
            Some((last, rows)) if last == g => rows.push(row),
            _ => per_group.push((g.to_string(), vec![row])),
        }
    }
    let (mut g_out, mut w_out, mut f_out, mut n_out) = (
        Vec::<String>::new(),
        Vec::<String>::new(),
        Vec::new(),
        Vec::new(),
    );
    for (g, rows) in &per_group {
        let scores: Vec<(&str, f64)> = rows.iter().map(|&(s, f, _)| (s, f)).collect();
        let Some((names, best)) = tied_best(&scores, decimals) else {
            continue;
        };
        let n = rows
            .iter()
            .find(|r| r.0 == names[0])
            .map(|r| r.2)
            .unwrap_or(0);
        g_out.push(g.clone());
        w_out.push(names.join(" = "));
        f_out.push(best);
        n_out.push(n);
    }
    df!("group" => g_out, "winner" => w_out, "f1" => f_out, "questions" => n_out).map_err(pe)
}

#[cfg(feature = "parquet")]
/// Per-question values of `column` (`"em"` or `"f1"`) for one system, keyed by
/// question id: the input of `evaluate::significance::compare`.
pub fn per_query(
    per_question: &DataFrame,
    system: &str,
    column: &str,
) -> Result<BTreeMap<String, f64>> {
    let sub = per_question
        .clone()
        .lazy()
        .filter(col("system").eq(lit(system)))
        .select([col("question_id"), col(column)])
        .collect()
        .map_err(pe)?;
    let ids = sub
        .column("question_id")
        .map_err(pe)?
        .str()
        .map_err(pe)?
        .clone();
    let vals = sub.column(column).map_err(pe)?.f64().map_err(pe)?.clone();
    let mut out = BTreeMap::new();
    for i in 0..sub.height() {
        if let (Some(id), Some(v)) = (ids.get(i), vals.get(i)) {
            out.insert(id.to_string(), v);
        }
    }
    if out.is_empty() {
        return Err(Error::param(
            "system",
            format!("no per-question rows for system `{system}`"),
        ));
    }
    Ok(out)
}

#[cfg(feature = "parquet")]
/// A DataFrame as a [`crate::display::Table`] (floats to `decimals` places, nulls
/// empty), for Markdown, CSV and the notebooks.
pub fn to_table(df: &DataFrame, decimals: usize) -> Result<crate::display::Table> {
    let mut t = crate::display::Table::new(df.get_column_names().iter().map(|s| s.to_string()));
    for i in 0..df.height() {
        let row = df.get_row(i).map_err(pe)?;
        t.push(row.0.iter().map(|v| match v {
            AnyValue::Null => String::new(),
            AnyValue::Float64(x) => format!("{x:.decimals$}"),
            AnyValue::Float32(x) => format!("{x:.decimals$}"),
            AnyValue::String(s) => s.to_string(),
            AnyValue::StringOwned(s) => s.to_string(),
            other => other.to_string(),
        }))?;
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_rule() {
        let cases = [
            ("What is the capital of France?", "What is"),
            ("what is it", "What is"),
            ("What was Lincoln's job?", "What"),
            ("What's up?", "Misc."),
            ("In what year did it end?", "In"),
            ("  \"When did he die?", "When"),
            ("Where is Pittsburgh?", "Where"),
            ("Which team won?", "Which"),
            ("Who is UPitt's 18th chancellor?", "Who"),
            ("Whose book is it?", "Misc."),
            ("How many?", "Misc."),
            ("Who?", "Who"),
            ("", "Misc."),
        ];
        for (q, g) in cases {
            assert_eq!(question_group(q), g, "{q}");
        }
    }

    #[cfg(feature = "parquet")]
    fn row(system: &str, q: &str, group: &str, em: f64, f1: f64, abst: bool) -> QuestionScore {
        QuestionScore {
            system: system.into(),
            question_id: q.into(),
            group: group.into(),
            em,
            f1,
            abstained: abst,
        }
    }

    /// Two systems, five questions in three groups, worked by hand in the comments.
    #[cfg(feature = "parquet")]
    fn rows() -> Vec<QuestionScore> {
        vec![
            // dense: Who q1 (1, 1), Who q2 (0, 0.5), What q3 abstained (0, 0),
            //        Misc. q4 (0, 0.25), What q5 (1, 1)
            row("dense", "q1", "Who", 1.0, 1.0, false),
            row("dense", "q2", "Who", 0.0, 0.5, false),
            row("dense", "q3", "What", 0.0, 0.0, true),
            row("dense", "q4", "Misc.", 0.0, 0.25, false),
            row("dense", "q5", "What", 1.0, 1.0, false),
            // sparse: Who q1 (0, 0.5), Who q2 (1, 1), What q3 (0, 0.5),
            //         Misc. q4 abstained (0, 0), What q5 abstained (0, 0)
            row("sparse", "q1", "Who", 0.0, 0.5, false),
            row("sparse", "q2", "Who", 1.0, 1.0, false),
            row("sparse", "q3", "What", 0.0, 0.5, false),
            row("sparse", "q4", "Misc.", 0.0, 0.0, true),
            row("sparse", "q5", "What", 0.0, 0.0, true),
        ]
    }

    #[test]
    fn tied_best_at_the_printed_precision() {
        // The same F1s summed in two orders: 0.1 + 0.2 + 0.3 = 0.6000000000000001 but
        // 0.3 + 0.2 + 0.1 = 0.6; both means print as 20.00.
        let a = (0.1 + 0.2 + 0.3) / 3.0 * 100.0;
        let b = (0.3 + 0.2 + 0.1) / 3.0 * 100.0;
        assert_ne!(a, b);
        let (names, best) = tied_best(&[("a", a), ("b", b), ("c", 19.99)], 2).unwrap();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(best, a.max(b));
        // 19.996 prints as 20.00 too; 19.994 as 19.99.
        let (names, _) = tied_best(&[("a", 20.0), ("b", 19.996), ("c", 19.994)], 2).unwrap();
        assert_eq!(names, ["a", "b"]);
        let (names, _) = tied_best(&[("a", 20.0), ("b", 19.996)], 3).unwrap();
        assert_eq!(names, ["a"]);
        assert!(tied_best(&[], 2).is_none());
        assert!(tied_best(&[("a", f64::NAN)], 2).is_none());
    }

    #[cfg(feature = "parquet")]
    fn f(df: &DataFrame, c: &str, i: usize) -> f64 {
        df.column(c).unwrap().f64().unwrap().get(i).unwrap()
    }

    #[cfg(feature = "parquet")]
    #[test]
    fn overall_with_abstentions_apart() {
        let df = per_question_frame(&rows()).unwrap();
        let o = overall(&df).unwrap();
        assert_eq!(o.height(), 2);
        // dense: EM 2/5 = 40, F1 (1 + .5 + 0 + .25 + 1)/5 = 55; answered 4:
        // EM 2/4 = 50, F1 2.75/4 = 68.75.
        assert!((f(&o, "em", 0) - 40.0).abs() < 1e-9);
        assert!((f(&o, "f1", 0) - 55.0).abs() < 1e-9);
        assert!((f(&o, "em_answered", 0) - 50.0).abs() < 1e-9);
        assert!((f(&o, "f1_answered", 0) - 68.75).abs() < 1e-9);
        assert_eq!(o.column("answered").unwrap().u32().unwrap().get(0), Some(4));
        assert_eq!(
            o.column("abstained").unwrap().u32().unwrap().get(1),
            Some(2)
        );
        // sparse: EM 1/5 = 20, F1 2/5 = 40; answered 3: EM 33.33, F1 2/3 = 66.67.
        assert!((f(&o, "em", 1) - 20.0).abs() < 1e-9);
        assert!((f(&o, "f1_answered", 1) - 200.0 / 3.0).abs() < 1e-9);
    }

    #[cfg(feature = "parquet")]
    #[test]
    fn per_group_tables_and_winners() {
        let df = per_question_frame(&rows()).unwrap();
        let g = by_group(&df).unwrap();
        let gc = g.column("group").unwrap().str().unwrap().clone();
        let groups: Vec<&str> = (0..gc.len()).map(|i| gc.get(i).unwrap()).collect();
        // Report 001's order: Misc., What, Who; each with dense then sparse.
        assert_eq!(groups, ["Misc.", "Misc.", "What", "What", "Who", "Who"]);
        // What/dense: EM (0 + 1)/2 = 50, F1 50; answered-only: q5 only → 100.
        assert!((f(&g, "em", 2) - 50.0).abs() < 1e-9);
        assert!((f(&g, "f1_answered", 2) - 100.0).abs() < 1e-9);
        // Misc./sparse: abstained on its only question → answered-only is null.
        assert!(g
            .column("f1_answered")
            .unwrap()
            .f64()
            .unwrap()
            .get(1)
            .is_none());
        let w = winners(&df, 2).unwrap();
        let t = to_table(&w, 2).unwrap();
        // Misc.: dense 25 vs sparse 0; What: dense 50 vs sparse 25;
        // Who: dense (1 + .5)/2 = 75, sparse (.5 + 1)/2 = 75 → a tie.
        assert_eq!(
            t.rows,
            vec![
                vec!["Misc.", "dense", "25.00", "1"],
                vec!["What", "dense", "50.00", "2"],
                vec!["Who", "dense = sparse", "75.00", "2"],
            ]
        );
        let pq = per_query(&df, "sparse", "f1").unwrap();
        assert_eq!(pq.len(), 5);
        assert_eq!(pq["q2"], 1.0);
        assert!(per_query(&df, "nobody", "f1").is_err());
        assert!(per_question_frame(&[rows()[0].clone(), rows()[0].clone()]).is_err());
    }

    #[cfg(feature = "parquet")]
    #[test]
    fn winners_tie_when_the_printed_means_tie() {
        // Who: dense (0.1 + 0.2)/2 = 0.15000000000000002, sparse (0.15 + 0.15)/2 = 0.15:
        // both print as 15.00, so both win. What: 25.00 against 24.99 is a sole winner.
        let rows = vec![
            row("dense", "q1", "Who", 0.0, 0.1, false),
            row("dense", "q2", "Who", 0.0, 0.2, false),
            row("sparse", "q1", "Who", 0.0, 0.15, false),
            row("sparse", "q2", "Who", 0.0, 0.15, false),
            row("dense", "q3", "What", 0.0, 0.25, false),
            row("sparse", "q3", "What", 0.0, 0.2499, false),
        ];
        let df = per_question_frame(&rows).unwrap();
        let t = to_table(&winners(&df, 2).unwrap(), 2).unwrap();
        assert_eq!(
            t.rows,
            vec![
                vec!["What", "dense", "25.00", "1"],
                vec!["Who", "dense = sparse", "15.00", "2"],
            ]
        );
        // At 4 decimals 25.0000 and 24.9900 still differ; 15.0000 still ties.
        let t = to_table(&winners(&df, 4).unwrap(), 4).unwrap();
        assert_eq!(t.rows[1][1], "dense = sparse");
    }
}
