"""Check an executed notebook; exit 1 on failure, naming each failing cell.

A notebook fails when a code cell
- was not executed (no execution count: the run stopped before it), unless its source is
  blank (nbclient skips those);

or has
- an error output (evcxr reports compilation errors and a dead subprocess this way);
- any text on stderr (evcxr prints an error returned by a cell's `?` there instead of
  failing the cell, and a notebook shows stderr as an error);
- a Rust panic or an evcxr error marker in any output text: stream text on stdout or
  stderr, an error's name/value/traceback, or the text of display data and results
  (evcxr catches a panic in a cell, prints it on stderr and lets the notebook go on, so
  `jupyter nbconvert --execute` exits 0);
- the tag `figure` but no image;
- a value that has an evcxr display hook (`Table`, `Figure`, the explanations, a polars
  `DataFrame`) shown as its Rust `Debug` dump instead, alone or inside a tuple, `Ok(…)` or
  list (evcxr does not call the hook for every final expression: a cell ending in
  `f()?.table()` showed `Debug`, one ending in a variable bound to the value never does);
- the absolute path of the checkout that ran it (a committed notebook would show a path of
  the machine that executed it).

    python3 scripts/check_notebook.py EXECUTED.ipynb
"""
import json
import os
import re
import sys

# Text that never appears in a working cell's output.
MARKERS = [
    # Rust's panic message ("thread '<unnamed>' panicked at src/x.rs:1:2:", older
    # "thread 'main' panicked at 'msg', src/x.rs") and its backtrace hint.
    "panicked at",
    "thread '<unnamed>' panicked",
    "RUST_BACKTRACE",
    # evcxr: the cell's process died, evcxr itself panicked, or its internal protocol lines
    # leaked into the output.
    "Subprocess terminated with",
    "Subprocess didn't start",
    "Panic detected. Here's some useful information",
    "A type redefinition resulted in the following variables being lost",
    "EVCXR_PANIC_NOTIFICATION",
    "EVCXR_ERROR_OCCURRED",
]

# Types with an `evcxr_display` hook: their `Debug` dump in a result means the hook was not
# called.
HOOKED = ["Table", "Figure", "TfIdfExplanation", "Bm25Explanation", "TokenRelevance"]
DEBUG_DUMP = re.compile(r"(?<![\w:])(%s) \{|^\s*(shape): \(\d+, \d+\)" % "|".join(HOOKED), re.M)


def _text(value):
    """nbformat stores multi-line text as one string or as a list of lines."""
    if isinstance(value, list):
        return "".join(str(v) for v in value)
    return value if isinstance(value, str) else ""


def output_texts(out):
    """(where, text) for every piece of text in one output."""
    kind = out.get("output_type")
    if kind == "stream":
        yield f"{out.get('name', 'stream')} stream", _text(out.get("text"))
    elif kind == "error":
        yield "error output", "\n".join(
            [_text(out.get("ename")), _text(out.get("evalue"))] + [_text(t) for t in out.get("traceback", [])])
    for mime, value in out.get("data", {}).items():
        if mime.startswith("text/") or mime.endswith("+json") or mime == "application/json":
            yield f"{kind} {mime}", _text(value) if not isinstance(value, dict) else json.dumps(value)


def cell_label(i, cell):
    first = next((line.strip() for line in _text(cell.get("source")).splitlines() if line.strip()), "")
    if len(first) > 60:
        first = first[:57] + "..."
    return f"cell {i} (id {cell.get('id', '?')}: {first!r})"


def problems(nb, root=None):
    """Every failure in the executed notebook `nb` (parsed JSON), one line each. `root`: the
    absolute path of the checkout that executed it, which no output may show."""
    found = []
    for i, cell in enumerate(nb.get("cells", [])):
        if cell.get("cell_type") != "code":
            continue
        label = cell_label(i, cell)
        # nbclient leaves cells with blank source unexecuted.
        if cell.get("execution_count") is None and _text(cell.get("source")).strip():
            found.append(f"{label}: was not executed (no execution count)")
        outputs = cell.get("outputs", [])
        # evcxr sends stderr a line or a few at a time: a panic and its backtrace arrive as many
        # stream outputs. Each (where, marker) is reported once per cell, and stderr text without
        # a marker once per cell.
        reported = set()
        stderr, stderr_marked = [], False
        for out in outputs:
            if out.get("output_type") == "error":
                found.append(f"{label}: error output {out.get('ename')}: {_text(out.get('evalue'))[:300]}")
                continue
            is_stderr = out.get("output_type") == "stream" and out.get("name") == "stderr"
            if is_stderr:
                stderr.append(_text(out.get("text")))
            for where, text in output_texts(out):
                for marker in MARKERS:
                    at = text.find(marker)
                    if at >= 0:
                        stderr_marked = stderr_marked or is_stderr
                        if (where, marker) not in reported:
                            reported.add((where, marker))
                            line_start = text.rfind("\n", 0, at) + 1
                            line_end = text.find("\n", at)
                            line = text[line_start:line_end if line_end >= 0 else len(text)].strip()
                            found.append(f"{label}: {where} has {marker!r}: {line[:300]}")
                        break
            if out.get("output_type") in ("execute_result", "display_data"):
                data = out.get("data", {})
                plain = _text(data.get("text/plain"))
                dump = DEBUG_DUMP.search(plain)
                if dump and not any(m != "text/plain" for m in data):
                    what = dump.group(1) or "polars DataFrame"
                    found.append(f"{label}: shows a {what} as its Debug dump, not its display "
                                 "(end the cell in a variable bound to it)")
            if root and root != os.sep:
                for where, text in output_texts(out):
                    if root in text:
                        found.append(f"{label}: {where} shows the checkout's absolute path {root}")
                        break
        if stderr and not stderr_marked:
            lines = [line for line in "".join(stderr).splitlines() if line.strip()]
            found.append(f"{label}: wrote to stderr stream: {(lines[0].strip() if lines else '(blank)')[:300]}")
        if "figure" in cell.get("metadata", {}).get("tags", []):
            if not any("image/png" in o.get("data", {}) for o in outputs):
                found.append(f"{label}: tagged `figure` but produced no image")
    return found


def summary(nb):
    cells = sum(1 for c in nb.get("cells", []) if c.get("cell_type") == "code")
    images = sum(1 for c in nb.get("cells", []) for o in c.get("outputs", [])
                 if "image/png" in o.get("data", {}) or "image/svg+xml" in o.get("data", {}))
    return cells, images


def main(path):
    with open(path) as f:
        nb = json.load(f)
    found = problems(nb, root=os.getcwd())
    if found:
        print(f"{path}: FAILED\n  " + "\n  ".join(found))
        return 1
    cells, images = summary(nb)
    print(f"{path}: ok ({cells} code cells, {images} images)")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: check_notebook.py EXECUTED.ipynb")
    sys.exit(main(sys.argv[1]))
