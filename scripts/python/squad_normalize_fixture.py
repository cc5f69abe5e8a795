"""Reference outputs of SQuAD's `normalize_answer` for `workbench::evaluate::qa`'s tests.

Writes `tests/data/squad_normalize.json` with, computed by real Python (`re`, `str`):

- `cases`: tricky answer strings with `normalize_answer(s)` and `get_tokens(s)` of the
  official SQuAD 2.0 script (transcribed in `squad_v2_eval.py`, imported here);
- `word_ranges`: the code points Python's `re` counts as `\\w` (str patterns), as
  inclusive [first, last] ranges: the characters that decide where `\\b` falls;
- `assigned_ranges`: the code points assigned in Python's Unicode database (general
  category not Cn, surrogates Cs left out), the domain `word_ranges` is checked on;
- `whitespace`: the code points `str.split()` splits on;
- `python`, `unicode`: the versions that produced them.

Regenerate with (standard library only):

    python3 scripts/python/squad_normalize_fixture.py > tests/data/squad_normalize.json
"""

import json
import os
import re
import sys
import unicodedata

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from squad_v2_eval import get_tokens, normalize_answer  # noqa: E402

CASES = [
    "The Cat!",
    "  A  quick,\tbrown\nfox. ",
    "the-end",
    "Theatre and anthem",
    # Combining marks (Mn): Python's \w excludes them, so \b falls between a letter and
    # a following mark.
    "the\u0301 end",
    "cafe\u0301 the",
    "e\u0301 the",
    "\u0301the",
    "a\u0301",
    "the\u0308",
    # Numbers that are not decimal digits (No, Nl): Python's \w includes them.
    "x\u00b2 the",
    "\u00b2the",
    "the\u00b2",
    "\u2171 the",
    "the\u2171",
    "\u00bdan",
    "\u2460the",
    # Underscore and other connector punctuation (Pc).
    "_the_",
    "the_",
    "the\u203fend",
    "\u203fthe\u203f",
    "a\uff3fb the",
    # Joiners (Cf).
    "the\u200d",
    "\u200cthe",
    # Enclosed letters (So).
    "\u24b6 the \u24b6",
    "the\u24b6",
    # Whitespace that str.split() splits on.
    "the\u00a0cat",
    "new\u00a0york",
    "a\u2003b\u3000c",
    "x\u001cy\u001dz\u001e w\u001fv",
    "one\u0085two",
    "p\u2028q\u2029r",
    "tab\u000bvt\u000cff",
    "zero\u200bwidth",
    "mongol\u180evowel",
    # Arabic and Devanagari marks.
    "\u0627\u0644\u0652the",
    "the\u064b",
    "\u0915\u093f the",
    "the\u093f",
    "\u0939\u093f\u0902\u0926\u0940 a \u092d\u093e\u0937\u093e",
    # Case mappings that change length or depend on context.
    "\u0130stanbul the",
    "\u039f\u0394\u039f\u03a3 the",
    "STRASSE the \u1e9e",
    "\ufb01 the",
    # Punctuation: ASCII only.
    "\u00abthe\u00bb",
    "\u201cthe\u201d",
    "the\u2019s",
    "the's",
    "a.b.c",
    "An",
    "",
    "   ",
]


def ranges(pred):
    out, start = [], None
    for cp in range(0x110001):
        inside = cp < 0x110000 and pred(cp)
        if inside and start is None:
            start = cp
        elif not inside and start is not None:
            out.append([start, cp - 1])
            start = None
    return out


def main():
    word = re.compile(r"\w")
    fixture = {
        "python": sys.version.split()[0],
        "unicode": unicodedata.unidata_version,
        "cases": [
            {"input": s, "normalized": normalize_answer(s), "tokens": get_tokens(s)}
            for s in CASES
        ],
        "word_ranges": ranges(lambda cp: word.match(chr(cp)) is not None),
        "assigned_ranges": ranges(
            lambda cp: unicodedata.category(chr(cp)) not in ("Cn", "Cs")
        ),
        "whitespace": [cp for cp in range(0x110000) if len(("a" + chr(cp) + "b").split()) == 2],
    }
    json.dump(fixture, sys.stdout, ensure_ascii=True, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
