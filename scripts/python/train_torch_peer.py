#!/usr/bin/env python3
"""PyTorch peer of the workbench's training loops (throughput only).

Reads the examples written by `train_reader --bench` or `train_reranker --bench` (JSONL)
and the exact batches (JSON list of index lists), builds the transformers model from the
same base model directory, and runs one AdamW update per batch with the same loss, the same
gradient clipping (global norm 1.0), the same linear warm-up, and torch.set_num_threads(N).

--task qa (default): rows are features (ids, type_ids, start, end); BertForQuestionAnswering,
  loss the mean of the start/end cross-entropies; a batch lists features.
--task cross: rows are (question, passage) pairs (ids, type_ids), `--group-size` consecutive
  rows per group with the positive first; BertForSequenceClassification with one label,
  loss the softmax cross-entropy of each group's positive; a batch lists groups.

Prints one JSON object: examples_per_second (features, or pairs) over the updates
(collation included, as in the workbench loop), seconds, updates, torch version.
"""
import argparse
import json
import time

import torch
from transformers import BertForQuestionAnswering, BertForSequenceClassification


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--features", required=True)
    ap.add_argument("--batches", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--weight-decay", type=float, default=0.01)
    ap.add_argument("--warmup", type=int, default=0)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--task", choices=["qa", "cross"], default="qa")
    ap.add_argument("--group-size", type=int, default=4)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    feats = [json.loads(line) for line in open(a.features)]
    batches = json.load(open(a.batches))
    # No dropout: candle's BERT has none, so both do the same arithmetic.
    no_dropout = dict(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    if a.task == "qa":
        model = BertForQuestionAnswering.from_pretrained(a.model, **no_dropout)
    else:
        model = BertForSequenceClassification.from_pretrained(a.model, num_labels=1, **no_dropout)
    model.train()
    # transformers' Trainer: no decay on biases and LayerNorm weights.
    decay = [p for n, p in model.named_parameters() if not (n.endswith("bias") or "LayerNorm" in n)]
    no_decay = [p for n, p in model.named_parameters() if n.endswith("bias") or "LayerNorm" in n]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": a.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=a.lr,
    )
    total = len(batches)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: s / max(1, a.warmup) if s < a.warmup else max(0.0, (total - s) / max(1, total - a.warmup))
    )
    n = 0
    losses = []
    t0 = time.perf_counter()
    for idx in batches:
        if a.task == "qa":
            fs = [feats[i] for i in idx]
        else:
            g = a.group_size
            fs = [feats[i * g + j] for i in idx for j in range(g)]
        L = max(len(f["ids"]) for f in fs)
        ids = torch.zeros((len(fs), L), dtype=torch.long)
        tt = torch.zeros_like(ids)
        mask = torch.zeros_like(ids)
        for r, f in enumerate(fs):
            k = len(f["ids"])
            ids[r, :k] = torch.tensor(f["ids"])
            tt[r, :k] = torch.tensor(f["type_ids"])
            mask[r, :k] = 1
        if a.task == "qa":
            sp = torch.tensor([f["start"] for f in fs])
            ep = torch.tensor([f["end"] for f in fs])
            out = model(input_ids=ids, token_type_ids=tt, attention_mask=mask, start_positions=sp, end_positions=ep)
            loss = out.loss
        else:
            logits = model(input_ids=ids, token_type_ids=tt, attention_mask=mask).logits.view(len(idx), a.group_size)
            loss = torch.nn.functional.cross_entropy(logits, torch.zeros(len(idx), dtype=torch.long))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad()
        losses.append(loss.item())
        n += len(fs)
    dt = time.perf_counter() - t0
    print(json.dumps({
        "examples_per_second": n / dt, "seconds": dt, "updates": total, "features": n,
        "torch": torch.__version__, "threads": torch.get_num_threads(), "losses": losses,
    }))


if __name__ == "__main__":
    main()
