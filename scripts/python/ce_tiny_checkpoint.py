"""Write a tiny randomly initialised cross-encoder checkpoint and its reference logits.

Used by `tests/cross_encoder_train.rs`: the Rust `CrossEncoder` (inference, candle's
BertModel) and the trainable `train::cross::CrossEncoderModel` must both reproduce these
logits (to ~1e-4). Writes `tests/data/tiny_ce/` (or under the folder given as the first
argument): `config.json`, `model.safetensors` (a `BertForSequenceClassification` with one
label, as the ms-marco cross-encoders, saved by transformers), `tokenizer.json` (the tiny
WordPiece tokenizer of `qa_tiny_checkpoint.py`) and `reference.json` (the pairs, the token
ids / types / mask of one padded batch, and the logits transformers computes for it).

Every weight is randomly initialised (seeded) and then perturbed, so LayerNorm scales and
biases are not 1/0 and the logits are far from zero: a wrong weight name, a missed pooler
or a wrong mask changes them well beyond the tolerance.

Run with the peers venv: ~/.cache/rag-workbench/peers-venv/bin/python scripts/python/ce_tiny_checkpoint.py
"""

import json
import os
import sys

import torch
from transformers import BertConfig, BertForSequenceClassification

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from qa_tiny_checkpoint import H, HEADS, INTER, LAYERS, MAXPOS, PAIRS, perturb, tokenizer  # noqa: E402

CE_PAIRS = PAIRS + [
    ("who wrote hamlet?", "The capital of France is Paris."),
    ("the oil crisis of 1973 and the war", "Peace."),
]


def main() -> None:
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/data"
    tok = tokenizer()
    torch.manual_seed(0)
    model = BertForSequenceClassification(
        BertConfig(
            vocab_size=tok.get_vocab_size(), hidden_size=H, num_hidden_layers=LAYERS,
            num_attention_heads=HEADS, intermediate_size=INTER, max_position_embeddings=MAXPOS,
            initializer_range=0.2, num_labels=1,
        )
    )
    perturb(model, 4)
    model.eval()
    d = os.path.join(out, "tiny_ce")
    os.makedirs(d, exist_ok=True)
    model.save_pretrained(d, safe_serialization=True)
    tok.save(os.path.join(d, "tokenizer.json"))
    encs = [tok.encode(q, p) for q, p in CE_PAIRS]
    n = max(len(e.ids) for e in encs)
    ids = [e.ids + [0] * (n - len(e.ids)) for e in encs]
    types = [e.type_ids + [0] * (n - len(e.ids)) for e in encs]
    mask = [[1] * len(e.ids) + [0] * (n - len(e.ids)) for e in encs]
    with torch.no_grad():
        logits = model(
            input_ids=torch.tensor(ids),
            token_type_ids=torch.tensor(types),
            attention_mask=torch.tensor(mask),
        ).logits
    ref = {
        "pairs": [list(p) for p in CE_PAIRS],
        "input_ids": ids,
        "token_type_ids": types,
        "attention_mask": mask,
        "logits": logits[:, 0].tolist(),
        "torch": torch.__version__,
        "transformers": __import__("transformers").__version__,
    }
    with open(os.path.join(d, "reference.json"), "w") as f:
        json.dump(ref, f, indent=1)
    print(d, sorted(os.listdir(d)))


if __name__ == "__main__":
    main()
