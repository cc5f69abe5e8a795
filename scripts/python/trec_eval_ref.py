"""trec_eval's own numbers for `tests/trec_eval.rs`, through pytrec_eval.

pytrec-eval-terrier compiles trec_eval 9.0.8's C code into a Python extension;
this script only feeds it runs and qrels and prints what it computes.

Input (stdin), one JSON object:

    {"cases": [{"id": "ties",
                "qrels": {"q1": {"d1": 2}} | "qrels_file": "path/to/qrels",
                "run": {"q1": {"d1": 1.5}} | "run_file": "path/to/run",
                "relevance_level": 1,
                "measures": ["ndcg_cut.1,10", "recip_rank", "P.5", ...]}]}

Run and qrels files are parsed with pytrec_eval's own `parse_run` /
`parse_qrel` (scores through Python's `float`, as trec_eval's `atof`).

Output (stdout), one JSON object:

    {"pytrec_eval": "0.5.11",
     "cases": {"ties": {"q1": {"ndcg_cut_1": 0.0, "recip_rank": 0.5, ...}}}}

with trec_eval's per-query values for the queries it evaluates (those in both
the run and the qrels). Any failure is a non-zero exit with the reason on stderr.
"""

import importlib.metadata
import json
import sys

import pytrec_eval


def load(case, key, parse):
    if key in case:
        return case[key]
    with open(case[key + "_file"], encoding="utf-8") as f:
        return parse(f)


def main():
    request = json.load(sys.stdin)
    out = {}
    for case in request["cases"]:
        qrels = load(case, "qrels", pytrec_eval.parse_qrel)
        run = load(case, "run", pytrec_eval.parse_run)
        # JSON gives ints for grades already; scores may arrive as ints too.
        run = {q: {d: float(s) for d, s in docs.items()} for q, docs in run.items()}
        evaluator = pytrec_eval.RelevanceEvaluator(
            qrels, set(case["measures"]), relevance_level=int(case["relevance_level"])
        )
        out[case["id"]] = evaluator.evaluate(run)
    json.dump(
        {"pytrec_eval": importlib.metadata.version("pytrec-eval-terrier"), "cases": out},
        sys.stdout,
    )


if __name__ == "__main__":
    main()
