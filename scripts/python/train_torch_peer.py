#!/usr/bin/env python3
"""PyTorch peer of the workbench's training loops (throughput only).

Reads the examples written by `train_reader --bench` or `train_reranker --bench` (JSONL),
the exact batches (JSON list of index lists) and the learning rate of every update (JSON
list), builds the transformers model from the model directory the workbench wrote (the
same initial weights as candle's, head included), and runs one AdamW update per batch with
the same loss, the same gradient clipping, the same learning rates, and
torch.set_num_threads(N) (intra-op and inter-op).

--task qa (default): rows are features (ids, type_ids, start, end); BertForQuestionAnswering,
  loss the mean of the start/end cross-entropies; a batch lists features.
--task cross: rows are (question, passage) pairs (ids, type_ids), `--group-size` consecutive
  rows per group with the positive first; BertForSequenceClassification with one label,
  loss the softmax cross-entropy of each group's positive; a batch lists groups.
--precision f32 (default) or bf16-autocast: the forward pass and the loss under
  torch.autocast("cpu", dtype=torch.bfloat16), the backward pass and AdamW as usual
  (float32 weights and moments).

The first `--warmup-updates` updates run untimed (PyTorch's first-update costs: lazy
optimizer state, oneDNN/MKL kernel set-up, the heap's first growth); the rest are timed
one by one, each from the collation of its batch to reading its loss, as the workbench's
loop times its updates. Process start-up, imports, reading the inputs and building the
model and the optimizer are outside every timing.

--product ROWS,INPUTS,OUTPUTS times only torch's linear product at that shape (the fastest of
--reps, float32 and bfloat16) and prints its multiply-adds per second.

Prints one JSON object (the last line of stdout): examples_per_second over the timed
updates, seconds (their sum), the timed updates and examples, and per update (warm-up
included) the seconds, loss, gradient norm, rows and padded length; the trained parameters,
the attention implementation, the threads, the
malloc seen in the process, GLIBC_TUNABLES, minor page faults over all updates and over the
timed ones, the process's CPU seconds and the wall seconds over all updates (and its CPU
seconds over the timed ones).
"""
import argparse
import contextlib
import json
import os
import resource
import time

T_START = time.perf_counter()

import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import BertForQuestionAnswering, BertForSequenceClassification  # noqa: E402

# Allocator libraries that would replace glibc's malloc if loaded (LD_PRELOAD or linked).
OTHER_MALLOCS = ("jemalloc", "tcmalloc", "mimalloc", "tbbmalloc", "hoard")


def malloc_in_process():
    """`glibc malloc` unless a known replacement is mapped into this process."""
    try:
        maps = open("/proc/self/maps").read()
    except OSError:
        return "unknown (no /proc/self/maps)"
    found = sorted({line.split()[-1] for line in maps.splitlines()
                    if any(m in line.split()[-1].lower() for m in OTHER_MALLOCS)})
    return ", ".join(found) if found else "glibc malloc"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--features", required=True)
    ap.add_argument("--batches", required=True)
    ap.add_argument("--lrs", required=True, help="JSON list: the learning rate of every update")
    ap.add_argument("--model", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--weight-decay", type=float, default=0.01)
    ap.add_argument("--beta1", type=float, default=0.9)
    ap.add_argument("--beta2", type=float, default=0.999)
    ap.add_argument("--eps", type=float, default=1e-8)
    ap.add_argument("--max-grad-norm", type=float, default=1.0, help="0: no clipping")
    ap.add_argument("--warmup-updates", type=int, default=0)
    ap.add_argument("--limit", type=int, default=0, help="run only the first N batches (0: all)")
    ap.add_argument("--precision", choices=["f32", "bf16-autocast"], default="f32")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--task", choices=["qa", "cross"], default="qa")
    ap.add_argument("--group-size", type=int, default=4)
    ap.add_argument("--product", help="ROWS,INPUTS,OUTPUTS: only time torch's linear product "
                    "at this shape (float32 and bfloat16), print its multiply-adds per second")
    ap.add_argument("--reps", type=int, default=10)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(a.threads)
    torch.manual_seed(a.seed)
    if a.product:
        rows, inputs, outputs = (int(x) for x in a.product.split(","))
        rates = {}
        for name, dtype in [("f32", torch.float32), ("bf16", torch.bfloat16)]:
            x = torch.randn(rows, inputs).to(dtype)
            w = torch.randn(outputs, inputs).to(dtype)
            b = torch.zeros(outputs).to(dtype)
            torch.nn.functional.linear(x, w, b)
            best = float("inf")
            for _ in range(a.reps):
                t0 = time.perf_counter()
                torch.nn.functional.linear(x, w, b)
                best = min(best, time.perf_counter() - t0)
            rates[name] = rows * inputs * outputs / best
        print(json.dumps({"product": [rows, inputs, outputs], "fmas_per_s": rates,
                          "threads": torch.get_num_threads()}))
        return
    feats = [json.loads(line) for line in open(a.features)]
    batches = json.load(open(a.batches))
    lrs = json.load(open(a.lrs))
    if a.limit:
        batches = batches[: a.limit]
    if len(lrs) < len(batches):
        raise SystemExit(f"{len(lrs)} learning rates for {len(batches)} batches")
    if a.warmup_updates >= len(batches):
        raise SystemExit(f"--warmup-updates {a.warmup_updates} leaves none of {len(batches)} batches timed")
    # No dropout: candle's BERT has none, so both do the same arithmetic.
    no_dropout = dict(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, output_loading_info=True)
    if a.task == "qa":
        model, info = BertForQuestionAnswering.from_pretrained(a.model, **no_dropout)
    else:
        model, info = BertForSequenceClassification.from_pretrained(a.model, num_labels=1, **no_dropout)
    # The same weights as candle's, or no comparison: every parameter comes from the file.
    missing = [k for k in info.get("missing_keys", []) if not k.endswith("position_ids")]
    if missing or info.get("mismatched_keys"):
        raise SystemExit(f"{a.model}: weights not in the file: {missing} {info.get('mismatched_keys')}")
    model.train()
    # transformers' Trainer (and the workbench's AdamW): no decay on biases and LayerNorm weights.
    decay = [p for n, p in model.named_parameters() if not (n.endswith("bias") or "LayerNorm" in n)]
    no_decay = [p for n, p in model.named_parameters() if n.endswith("bias") or "LayerNorm" in n]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": a.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=lrs[0], betas=(a.beta1, a.beta2), eps=a.eps,
    )
    autocast = (lambda: torch.autocast("cpu", dtype=torch.bfloat16)) if a.precision == "bf16-autocast" \
        else contextlib.nullcontext
    update_seconds, losses, grad_norms, rows, padded = [], [], [], [], []
    faults0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    cpu0 = time.process_time()
    t_first = time.perf_counter()
    t_timed = None
    faults_timed0 = faults0
    cpu_timed0 = time.process_time()
    for step, idx in enumerate(batches):
        if step == a.warmup_updates:
            t_timed = time.perf_counter()
            faults_timed0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            cpu_timed0 = time.process_time()
        t0 = time.perf_counter()
        for g in opt.param_groups:
            g["lr"] = lrs[step]
        if a.task == "qa":
            fs = [feats[i] for i in idx]
        else:
            gs = a.group_size
            fs = [feats[i * gs + j] for i in idx for j in range(gs)]
        L = max(len(f["ids"]) for f in fs)
        ids = torch.zeros((len(fs), L), dtype=torch.long)
        tt = torch.zeros_like(ids)
        mask = torch.zeros_like(ids)
        for r, f in enumerate(fs):
            k = len(f["ids"])
            ids[r, :k] = torch.tensor(f["ids"])
            tt[r, :k] = torch.tensor(f["type_ids"])
            mask[r, :k] = 1
        with autocast():
            if a.task == "qa":
                sp = torch.tensor([f["start"] for f in fs])
                ep = torch.tensor([f["end"] for f in fs])
                out = model(input_ids=ids, token_type_ids=tt, attention_mask=mask,
                            start_positions=sp, end_positions=ep)
                loss = out.loss
            else:
                logits = model(input_ids=ids, token_type_ids=tt, attention_mask=mask).logits
                logits = logits.float().view(len(idx), a.group_size)
                loss = torch.nn.functional.cross_entropy(logits, torch.zeros(len(idx), dtype=torch.long))
        loss.backward()
        max_norm = a.max_grad_norm if a.max_grad_norm > 0 else float("inf")
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
        update_seconds.append(time.perf_counter() - t0)
        grad_norms.append(float(norm))
        rows.append(len(fs))
        padded.append(L)
    t_end = time.perf_counter()
    faults_end = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    cpu_end = time.process_time()
    w = a.warmup_updates
    seconds = sum(update_seconds[w:])
    examples = sum(rows[w:])
    print(json.dumps({
        "precision": a.precision,
        "examples_per_second": examples / seconds,
        "seconds": seconds,
        "wall_seconds": t_end - t_timed,
        "updates": len(batches) - w,
        "warmup_updates": w,
        "examples": examples,
        "startup_seconds": t_first - T_START,
        "update_seconds": update_seconds,
        "losses": losses,
        "grad_norms": grad_norms,
        "rows": rows,
        "padded_len": padded,
        "minor_faults": faults_end - faults0,
        "minor_faults_timed": faults_end - faults_timed0,
        "cpu_seconds_timed": cpu_end - cpu_timed0,
        "cpu_seconds": cpu_end - cpu0,
        "all_wall_seconds": t_end - t_first,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "parameters": sum(p.numel() for p in model.parameters() if p.requires_grad),
        "attention": getattr(model.config, "_attn_implementation", None) or "unknown",
        "threads": torch.get_num_threads(),
        "interop_threads": torch.get_num_interop_threads(),
        "malloc": malloc_in_process(),
        "glibc_tunables": os.environ.get("GLIBC_TUNABLES", ""),
    }))


if __name__ == "__main__":
    main()
