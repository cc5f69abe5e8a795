"""Write tiny randomly initialised question-answering checkpoints and their reference logits.

Used by `tests/extractive.rs` (the Rust `QaModel` must reproduce these logits to ~1e-4).
Writes, under `tests/data/` (or the folder given as the first argument):

- `tiny_qa/`            BertForQuestionAnswering (`bert.*` + `qa_outputs`), saved by transformers
- `tiny_qa_distilbert/` DistilBertForQuestionAnswering (`distilbert.*` + `qa_outputs`)
- `tiny_qa_roberta/`    RobertaForQuestionAnswering (`roberta.*` + `qa_outputs`)

each with `config.json`, `model.safetensors`, `tokenizer.json` (the same small WordPiece
tokenizer for all three, lowercasing and accent-stripping like bert-base-uncased) and
`reference.json`: the question/context pairs, the token ids, token types and attention
masks of one padded batch, and the start/end logits transformers computes for it.

Every weight is randomly initialised (seeded) and then perturbed, so LayerNorm scales
and biases are not 1/0 and the logits are far from zero: a wrong weight name, a missed
bias or a wrong mask changes them well beyond the tolerance.

Run with the peers venv: ~/.cache/rag-workbench/peers-venv/bin/python scripts/python/qa_tiny_checkpoint.py
"""

import json
import os
import sys

import torch
from tokenizers import Tokenizer, decoders, normalizers, pre_tokenizers, processors
from tokenizers.models import WordPiece
from transformers import (
    BertConfig,
    BertForQuestionAnswering,
    DistilBertConfig,
    DistilBertForQuestionAnswering,
    RobertaConfig,
    RobertaForQuestionAnswering,
)

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = (
    "the a an of in on at to is was who what when where which how many did does wrote "
    "born city capital river paris france zurich cafe munchen germany hamlet shakespeare "
    "play plays tragedy written by year century first king queen war peace oil crisis "
    "1973 1850 ? , . ' - ( ) answer question long context window boundary dynasty yuan "
    "parliament scottish huguenot french indian and or not no yes"
).split()
PIECES = ["##s", "##ed", "##ing", "##er", "##ly", "##a", "##e", "##i", "##o", "##n", "##t"]
LETTERS = list("abcdefghijklmnopqrstuvwxyz0123456789")
PAIRS = [
    ("who wrote hamlet?", "Hamlet is a tragedy written by Shakespeare in the first century."),
    ("where is Zürich?", "Zürich is a city; München is in Germany, not in France."),
    ("what crisis?", "The oil crisis of 1973."),
]
H, LAYERS, HEADS, INTER, MAXPOS = 32, 2, 2, 37, 64


def tokenizer() -> Tokenizer:
    vocab = {}
    for w in SPECIALS + WORDS + PIECES + LETTERS + ["##" + c for c in LETTERS]:
        vocab.setdefault(w, len(vocab))
    tok = Tokenizer(WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=True
    )
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A:0 [SEP]:0 $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
    )
    tok.decoder = decoders.WordPiece(prefix="##")
    return tok


def perturb(model: torch.nn.Module, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.2 * torch.randn(p.shape, generator=g))


def batch(tok: Tokenizer, zero_types: bool):
    encs = [tok.encode(q, c) for q, c in PAIRS]
    n = max(len(e.ids) for e in encs)
    ids = [e.ids + [0] * (n - len(e.ids)) for e in encs]
    types = [
        ([0] * len(e.ids) if zero_types else e.type_ids) + [0] * (n - len(e.ids)) for e in encs
    ]
    mask = [[1] * len(e.ids) + [0] * (n - len(e.ids)) for e in encs]
    return ids, types, mask


def write(out: str, name: str, model, tok: Tokenizer, zero_types: bool) -> None:
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    model.eval()
    model.save_pretrained(d, safe_serialization=True)
    tok.save(os.path.join(d, "tokenizer.json"))
    ids, types, mask = batch(tok, zero_types)
    kwargs = dict(input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask))
    if name != "tiny_qa_distilbert":
        kwargs["token_type_ids"] = torch.tensor(types)
    with torch.no_grad():
        o = model(**kwargs)
    ref = {
        "pairs": [list(p) for p in PAIRS],
        "input_ids": ids,
        "token_type_ids": types,
        "attention_mask": mask,
        "start_logits": o.start_logits.tolist(),
        "end_logits": o.end_logits.tolist(),
        "torch": torch.__version__,
        "transformers": __import__("transformers").__version__,
    }
    with open(os.path.join(d, "reference.json"), "w") as f:
        json.dump(ref, f, indent=1)
    print(d, sorted(os.listdir(d)))


def main() -> None:
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/data"
    tok = tokenizer()
    vocab = tok.get_vocab_size()

    torch.manual_seed(0)
    bert = BertForQuestionAnswering(
        BertConfig(
            vocab_size=vocab, hidden_size=H, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
            intermediate_size=INTER, max_position_embeddings=MAXPOS, initializer_range=0.2,
        )
    )
    perturb(bert, 1)
    write(out, "tiny_qa", bert, tok, zero_types=False)

    torch.manual_seed(0)
    distil = DistilBertForQuestionAnswering(
        DistilBertConfig(
            vocab_size=vocab, dim=H, n_layers=LAYERS, n_heads=HEADS, hidden_dim=INTER,
            max_position_embeddings=MAXPOS, initializer_range=0.2,
        )
    )
    perturb(distil, 2)
    write(out, "tiny_qa_distilbert", distil, tok, zero_types=True)

    torch.manual_seed(0)
    roberta = RobertaForQuestionAnswering(
        RobertaConfig(
            vocab_size=vocab, hidden_size=H, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
            intermediate_size=INTER, max_position_embeddings=MAXPOS + 2, type_vocab_size=1,
            pad_token_id=0, bos_token_id=2, eos_token_id=3, initializer_range=0.2,
        )
    )
    perturb(roberta, 3)
    write(out, "tiny_qa_roberta", roberta, tok, zero_types=True)


if __name__ == "__main__":
    main()
