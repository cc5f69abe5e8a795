"""Embedding peers: all-MiniLM-L6-v2 on ONNX Runtime or OpenVINO (CPU, float32), throughput.

Run with the peers venv (scripts/lib.sh `ensure_peers`):

    ~/.cache/rag-workbench/peers-venv/bin/python scripts/python/bench_onnx.py
        --engine {onnxruntime,openvino} [--ov-hint {latency,throughput}] [--n 512]
        [--batch-size 64] [--threads 2] [--runs 3] [--out PATH] [--vectors PATH]

Texts: exactly bench_st.py's (the first N non-empty wiki-leads extracts, file order, whole).

Model: the project's cached all-MiniLM-L6-v2 safetensors (checked by sha256), exported here to
ONNX, offline, once, and cached under $WORKBENCH_HOME/onnx/<sha256 of model.safetensors>/
(default ~/.cache/rag-workbench/onnx/). A manifest beside the files records the recipe (opset,
library versions) and the sha256 of both ONNX files; a changed checkpoint gets a new folder, a
changed recipe or a corrupt file is re-exported, so the cache cannot go stale silently.

  1. Export: transformers' BertModel (eager attention) through torch.onnx.export with the
     TorchScript exporter at opset 14, inputs input_ids / attention_mask / token_type_ids (int64,
     dynamic batch and sequence axes), output last_hidden_state: the graph `optimum-cli export
     onnx --task feature-extraction` writes for BERT. (optimum-onnx 0.1.0, the current release,
     requires transformers < 4.58, while sentence-transformers 6.2, the other peer in this venv,
     requires transformers >= 5; so the export is done with the same torch call directly.)
  2. O2: onnxruntime.transformers.optimizer.optimize_model(model_type="bert", num_heads=12,
     hidden_size=384, opt_level=2) with optimum's fusion options: what optimum's
     ORTOptimizer runs for AutoOptimizationConfig.O2() ("basic and extended general
     optimizations, transformers-specific fusions": Attention, SkipLayerNormalization,
     BiasGelu; no EmbedLayerNormalization fusion and no GELU approximation, so the numbers
     stay those of the model). Checked once by hand against optimum's own export and O2 (run
     with transformers 4.57 on the side): the same fused operators (6 Attention, 18 MatMul,
     12 SkipLayerNormalization, 6 BiasGelu).

Engines, both on that O2 graph:
  - onnxruntime: InferenceSession, CPUExecutionProvider, graph_optimization_level ORT_ENABLE_ALL,
    intra_op_num_threads = --threads, inter_op_num_threads = 1, sequential execution, batches in
    turn; or, with --ort-mode per-thread, --threads batches at a time on the same session from
    as many Python threads (run() is thread-safe and releases the GIL), one intra-op thread each
    (the way OpenVINO's THROUGHPUT hint uses the cores).
  - openvino: Core().compile_model(<O2 onnx>, "CPU", INFERENCE_NUM_THREADS = --threads,
    INFERENCE_PRECISION_HINT f32 (this CPU's default is bf16: the benchmark is float32),
    PERFORMANCE_HINT LATENCY (one stream, batches in turn) or THROUGHPUT (OpenVINO picks the
    streams; batches are queued on an AsyncInferQueue of its optimal number of requests)).

Timed, per run, over all N texts: tokenisation (the `tokenizers` fast tokenizer from the
snapshot's tokenizer.json, truncation 256, all texts in one encode_batch with
RAYON_NUM_THREADS = --threads), sorting by token count (longest first), batching with padding
to each batch's longest, inference, mean pooling over the attention mask and L2
normalisation, in numpy. One untimed warm-up encode first. Reported like bench_st.py:
wall and process CPU seconds per run (time.process_time, all threads).

Output: one JSON line on stdout (and in `--out`); with `--vectors`, the last run's vectors as
little-endian float32, N × 384 row-major, in input order (bench_embed compares them with its
own by cosine).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

# Before numpy / tokenizers / the engines start a thread pool.
_threads_arg = "2"
for _i, _a in enumerate(sys.argv):
    if _a == "--threads" and _i + 1 < len(sys.argv):
        _threads_arg = sys.argv[_i + 1]
    elif _a.startswith("--threads="):
        _threads_arg = _a.split("=", 1)[1]
os.environ["RAYON_NUM_THREADS"] = _threads_arg  # the tokenizers crate's rayon pool
os.environ["OMP_NUM_THREADS"] = _threads_arg
os.environ["TOKENIZERS_PARALLELISM"] = "true"

from bench_st import LEADS, load_texts  # noqa: E402  (sets the offline hub variables via minilm)
from minilm import DIM, MAX_SEQ_LENGTH, MODEL_ID, MODEL_SHA256, sha256_file, snapshot_dir  # noqa: E402

OPSET = 18  # optimum-onnx 0.1.0's default for BERT
NUM_HEADS = 12
HIDDEN = 384
WORKBENCH_HOME = Path(os.environ.get("WORKBENCH_HOME") or Path.home() / ".cache" / "rag-workbench")


def recipe() -> dict:
    """Everything the cached ONNX files depend on besides the checkpoint."""
    import onnx
    import onnxruntime
    import torch
    import transformers

    return {
        "exporter": "torch.onnx.export(dynamo=False)",
        "opset": OPSET,
        "inputs": ["input_ids", "attention_mask", "token_type_ids"],
        "output": "last_hidden_state",
        "optimizer": "onnxruntime.transformers.optimizer.optimize_model(model_type='bert', opt_level=2)",
        "fusions": "FusionOptions('bert') without EmbedLayerNormalization (optimum's O2)",
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "onnx": onnx.__version__,
        "onnxruntime": onnxruntime.__version__,
    }


def export(snap: Path, dest: Path) -> None:
    """Plain ONNX export of the BertModel in `snap` to dest/model.onnx."""
    import torch
    from transformers import AutoModel

    model = AutoModel.from_pretrained(str(snap), attn_implementation="eager", dtype=torch.float32)
    model.eval()
    # Two sequences of different lengths, so no shape is baked in.
    ids = torch.tensor([[101, 7592, 2088, 102], [101, 7592, 102, 0]], dtype=torch.long)
    mask = (ids != 0).long()
    types = torch.zeros_like(ids)

    class LastHidden(torch.nn.Module):
        def __init__(self, bert):
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.bert(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    axes = {0: "batch_size", 1: "sequence_length"}
    with torch.inference_mode():
        torch.onnx.export(
            LastHidden(model),
            (ids, mask, types),
            str(dest / "model.onnx"),
            dynamo=False,
            opset_version=OPSET,
            input_names=["input_ids", "attention_mask", "token_type_ids"],
            output_names=["last_hidden_state"],
            dynamic_axes={"input_ids": axes, "attention_mask": axes, "token_type_ids": axes, "last_hidden_state": axes},
            do_constant_folding=True,
        )


def optimize_o2(src: Path, dst: Path) -> dict:
    """optimum's O2 for BERT: ORT's transformer optimizer at opt_level 2, default fusions."""
    from onnxruntime.transformers.fusion_options import FusionOptions
    from onnxruntime.transformers.optimizer import optimize_model

    opts = FusionOptions("bert")  # enable_gelu_approximation stays False (that is O3)
    opts.enable_embed_layer_norm = False  # optimum: disable_embed_layer_norm_fusion=True
    m = optimize_model(
        str(src), model_type="bert", num_heads=NUM_HEADS, hidden_size=HIDDEN,
        optimization_options=opts, opt_level=2, use_gpu=False,
    )
    m.save_model_to_file(str(dst))
    return m.get_fused_operator_statistics()


def onnx_model(snap: Path, model_sha: str) -> tuple[Path, dict]:
    """The O2 ONNX file for this checkpoint, exported and optimised on first use (see module doc)."""
    folder = WORKBENCH_HOME / "onnx" / model_sha
    manifest_path = folder / "manifest.json"
    want = recipe()
    if manifest_path.is_file():
        try:
            man = json.loads(manifest_path.read_text())
            ok = (
                man.get("model_sha256") == model_sha
                and man.get("recipe") == want
                and all(sha256_file(folder / f) == h for f, h in man["files"].items())
            )
        except (OSError, ValueError, KeyError, TypeError) as e:
            print(f"{manifest_path}: unreadable ({e}); re-exporting", file=sys.stderr)
            ok = False
        if ok:
            return folder / "model_o2.onnx", man
        print(f"{folder}: recipe or files changed; re-exporting", file=sys.stderr)
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{model_sha[:12]}-", dir=folder.parent))
    try:
        t0 = time.perf_counter()
        export(snap, tmp)
        stats = optimize_o2(tmp / "model.onnx", tmp / "model_o2.onnx")
        man = {
            "model": MODEL_ID,
            "model_sha256": model_sha,
            "recipe": want,
            "fused_operators": stats,
            "export_s": round(time.perf_counter() - t0, 1),
            "files": {f: sha256_file(tmp / f) for f in ("model.onnx", "model_o2.onnx")},
        }
        (tmp / "manifest.json").write_text(json.dumps(man, indent=1) + "\n")
        if folder.exists():
            shutil.rmtree(folder)
        tmp.rename(folder)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    print(f"exported {MODEL_ID} to {folder} (O2 fusions: {stats})", file=sys.stderr)
    return folder / "model_o2.onnx", man


class Encoder:
    """Tokenise, batch, run, pool, normalise: the whole timed pipeline."""

    def __init__(self, snap: Path, batch_size: int, run_batches):
        from tokenizers import Tokenizer

        self.tok = Tokenizer.from_file(str(snap / "tokenizer.json"))
        self.tok.enable_truncation(MAX_SEQ_LENGTH)  # tokenizer.json says 128: see minilm.py
        self.tok.no_padding()
        self.batch_size = batch_size
        self.run_batches = run_batches  # list of (ids, mask, types) -> list of hidden arrays

    def token_counts(self, texts: list[str]) -> list[int]:
        return [len(e.ids) for e in self.tok.encode_batch(texts)]

    def encode(self, texts: list[str]):
        import numpy as np

        encs = self.tok.encode_batch(texts)
        order = sorted(range(len(encs)), key=lambda i: -len(encs[i].ids))  # stable: longest first
        batches = []
        for s in range(0, len(order), self.batch_size):
            idx = order[s : s + self.batch_size]
            width = len(encs[idx[0]].ids)
            ids = np.zeros((len(idx), width), dtype=np.int64)
            mask = np.zeros((len(idx), width), dtype=np.int64)
            for r, i in enumerate(idx):
                e = encs[i].ids
                ids[r, : len(e)] = e
                mask[r, : len(e)] = 1
            batches.append((idx, ids, mask))
        hidden = self.run_batches([(ids, mask, np.zeros_like(ids)) for _, ids, mask in batches])
        out = np.empty((len(texts), DIM), dtype=np.float32)
        for (idx, _, mask), h in zip(batches, hidden):
            m = mask.astype(np.float32)
            pooled = np.einsum("bld,bl->bd", h, m) / np.maximum(m.sum(1, keepdims=True), 1e-9)
            norm = np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
            out[idx] = pooled / norm
        return out


def onnxruntime_engine(path: Path, threads: int, concurrent: int):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    # One run at a time with all threads, or `concurrent` runs side by side with a share each.
    intra = threads if concurrent == 1 else max(1, threads // concurrent)
    so.intra_op_num_threads = intra
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])

    def one(b):
        i, m, t = b
        return sess.run(["last_hidden_state"], {"input_ids": i, "attention_mask": m, "token_type_ids": t})[0]

    if concurrent == 1:

        def run(batches):
            return [one(b) for b in batches]

    else:
        from concurrent.futures import ThreadPoolExecutor

        workers = ThreadPoolExecutor(concurrent)  # InferenceSession.run is thread-safe, drops the GIL

        def run(batches):
            return list(workers.map(one, batches))

    info = {
        "engine": "onnxruntime",
        "engine_version": ort.__version__,
        "providers": sess.get_providers(),
        "graph_optimization_level": "ORT_ENABLE_ALL",
        "intra_op_num_threads": intra,
        "inter_op_num_threads": 1,
        "concurrent_runs": concurrent,
    }
    return run, info


def openvino_engine(path: Path, threads: int, hint: str):
    import openvino as ov
    import openvino.properties as props
    import openvino.properties.hint as hints

    core = ov.Core()
    config = {
        props.inference_num_threads: threads,
        hints.inference_precision: ov.Type.f32,
        hints.performance_mode: {
            "latency": hints.PerformanceMode.LATENCY,
            "throughput": hints.PerformanceMode.THROUGHPUT,
        }[hint],
    }
    compiled = core.compile_model(core.read_model(str(path)), "CPU", config)
    names = [p.get_any_name() for p in compiled.inputs]
    out_port = compiled.output("last_hidden_state")

    if hint == "latency":
        req = compiled.create_infer_request()

        def run(batches):
            res = []
            for b in batches:
                r = req.infer(dict(zip(names, b)))
                res.append(r[out_port].copy())
            return res

        jobs = 1
    else:
        jobs = compiled.get_property(props.optimal_number_of_infer_requests)
        queue = ov.AsyncInferQueue(compiled, jobs)

        def run(batches):
            res = [None] * len(batches)

            def done(request, k):
                res[k] = request.get_tensor(out_port).data.copy()

            queue.set_callback(done)
            for k, b in enumerate(batches):
                queue.start_async(dict(zip(names, b)), k)
            queue.wait_all()
            return res

    info = {
        "engine": "openvino",
        "engine_version": ov.get_version(),
        "performance_hint": hint.upper(),
        "inference_num_threads": compiled.get_property(props.inference_num_threads),
        "num_streams": str(compiled.get_property(props.streams.num)),
        "infer_requests": jobs,
        "inference_precision": str(compiled.get_property(hints.inference_precision)),
    }
    return run, info


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engine", choices=["onnxruntime", "openvino"], required=True)
    ap.add_argument("--ov-hint", choices=["latency", "throughput"], default="latency")
    ap.add_argument(
        "--ort-mode", choices=["intra-op", "per-thread"], default="intra-op",
        help="onnxruntime: batches in turn with --threads intra-op threads, or --threads batches "
        "side by side with one intra-op thread each",
    )
    ap.add_argument("--corpus", type=Path, default=LEADS)
    ap.add_argument("--n", type=int, default=512)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--vectors", type=Path, help="write the last run's vectors here (float32 LE, N x 384)")
    ap.add_argument("--export-only", action="store_true", help="make the cached ONNX files and stop")
    ap.add_argument("--onnx-file", type=Path, help="run this ONNX file instead (e.g. optimum's own export, to compare)")
    args = ap.parse_args()
    if str(args.threads) != _threads_arg:
        raise SystemExit("--threads must be given as `--threads N` or `--threads=N`")

    import numpy as np

    snap = snapshot_dir()
    sha = sha256_file(snap / "model.safetensors")
    if sha != MODEL_SHA256:
        raise SystemExit(f"{snap / 'model.safetensors'}: sha256 {sha}, expected {MODEL_SHA256}")
    path, manifest = onnx_model(snap, sha)
    if args.onnx_file:
        path = args.onnx_file
        manifest = {"files": {"model_o2.onnx": sha256_file(path)}, "recipe": "given by --onnx-file"}
    if args.export_only:
        print(json.dumps({"onnx": str(path), "manifest": manifest}))
        return

    texts = load_texts(args.corpus, args.n)
    if args.engine == "onnxruntime":
        concurrent = args.threads if args.ort_mode == "per-thread" else 1
        run, info = onnxruntime_engine(path, args.threads, concurrent)
    else:
        run, info = openvino_engine(path, args.threads, args.ov_hint)
    enc = Encoder(snap, args.batch_size, run)
    lens = enc.token_counts(texts)

    enc.encode(texts)  # warm-up
    load_before = os.getloadavg()[0]
    times, cpu = [], []
    for _ in range(args.runs):
        t0, c0 = time.perf_counter(), time.process_time()
        emb = enc.encode(texts)
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    assert emb.shape == (len(texts), DIM) and np.isfinite(emb).all()
    if args.vectors:
        args.vectors.parent.mkdir(parents=True, exist_ok=True)
        emb.astype("<f4").tofile(args.vectors)

    med = statistics.median(times)
    out = {
        "peer": info["engine"]
        + (f"-{args.ov_hint}" if info["engine"] == "openvino" else "")
        + ("-per-thread" if info["engine"] == "onnxruntime" and args.ort_mode == "per-thread" else ""),
        "model": MODEL_ID,
        "model_sha256": sha,
        "onnx": str(path),
        "onnx_sha256": manifest["files"]["model_o2.onnx"],
        "onnx_recipe": manifest["recipe"],
        "o2_fused_operators": manifest.get("fused_operators"),
        **info,
        "numpy_version": np.__version__,
        "device": "cpu",
        "dtype": "float32",
        "threads": args.threads,
        "batch_size": args.batch_size,
        "max_seq_length": MAX_SEQ_LENGTH,
        "corpus": str(args.corpus),
        "num_texts": len(texts),
        "texts_sha256": hashlib.sha256("\n".join(texts).encode()).hexdigest(),
        "avg_tokens": round(sum(lens) / len(lens), 2),
        "truncated_texts": sum(n >= MAX_SEQ_LENGTH for n in lens),
        "runs": args.runs,
        "run_s": [round(t, 4) for t in times],
        "sentences_per_s": round(len(texts) / med, 2),
        "tokens_per_s": round(sum(lens) / med, 1),
        "cpu_s": [round(c, 4) for c in cpu],
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
