"""Write the notebooks from their cell lists, adopt executed copies, check the committed ones.

    python3 notebooks/make_notebooks.py                 # write NAME.ipynb from notebooks/src/NAME.py
    python3 notebooks/make_notebooks.py --adopt DIR --scale quick --commit SHA
                                                        # executed copies in DIR become the committed ones
    python3 notebooks/make_notebooks.py --check         # committed notebooks: executed, from their sources
    python3 notebooks/make_notebooks.py --check --allow-unexecuted   # … listing never-executed ones

Each notebook's cells live in `notebooks/src/NAME.py` as a list `CELLS` of
`(kind, source, *tags)` tuples. To add a notebook, add a file there.

The committed `NAME.ipynb` carries the outputs of its last execution by `scripts/reproduce`
(the quick scale), so a reader sees tables, figures and answers on the repository page.
Writing keeps those outputs when the code cells are unchanged (a markdown cell's prose may
change: it has no outputs) and clears them when a code cell changed (then
`scripts/reproduce --only notebooks` executes and adopts it again). `--adopt` stamps a
notebook with the SHA-256 of the code cells it ran (`metadata.workbench.cells_sha256`: each
code cell's id, source and tags), the scale, the commit and the date; `--check` fails when a
committed notebook's cells differ from its source file, when it was not executed, or when its
stamp does not match its code cells (outputs from other sources).
"""
import argparse
import datetime
import hashlib
import importlib.util
import json
import pathlib
import sys

HERE = pathlib.Path(__file__).parent
# The largest committed notebook; figures are PNG, never model files.
MAX_BYTES = 2_000_000


def cells_from_source(src):
    spec = importlib.util.spec_from_file_location(src.stem, src)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = []
    for i, (kind, text, *tags) in enumerate(mod.CELLS):
        c = {"cell_type": kind, "id": f"cell-{i:02d}", "metadata": {},
             "source": text.strip("\n").splitlines(keepends=True)}
        if tags:
            c["metadata"]["tags"] = tags
        if kind == "code":
            c["outputs"] = []
            c["execution_count"] = None
        out.append(c)
    return out


def _source(cell):
    s = cell.get("source", "")
    return "".join(s) if isinstance(s, list) else s


def shape(cells):
    """What identifies a notebook's program: each cell's kind, id, source and tags."""
    return [(c.get("cell_type"), c.get("id"), _source(c), list(c.get("metadata", {}).get("tags", [])))
            for c in cells]


def program(cells):
    """What produces a notebook's outputs: the shape of its code cells (markdown has none)."""
    return [s for s in shape(cells) if s[0] == "code"]


def cells_sha256(cells):
    """The stamp of an execution: the SHA-256 of the code cells that ran."""
    return hashlib.sha256(json.dumps(program(cells), ensure_ascii=False).encode()).hexdigest()


def notebook(cells, workbench=None):
    metadata = {
        "kernelspec": {"display_name": "Rust", "language": "rust", "name": "rust"},
        "language_info": {"name": "Rust", "file_extension": ".rs", "mimetype": "text/rust",
                          "codemirror_mode": "rust", "pygment_lexer": "rust", "version": ""},
    }
    if workbench is not None:
        metadata["workbench"] = workbench
    return {"cells": cells, "metadata": metadata, "nbformat": 4, "nbformat_minor": 5}


def dump(nb):
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n"


def sources(here=HERE):
    return sorted((here / "src").glob("*.py"))


def write(here=HERE):
    for src in sources(here):
        cells = cells_from_source(src)
        path = here / (src.stem + ".ipynb")
        if path.exists():
            old = json.loads(path.read_text())
            old_cells = old.get("cells", [])
            if shape(old_cells) == shape(cells):
                print("unchanged", path)
                continue
            if program(old_cells) == program(cells) and len(old_cells) == len(cells):
                # Only markdown changed: the code cells keep their outputs and the stamp.
                kept = [o if c["cell_type"] == "code" else c for o, c in zip(old_cells, cells)]
                path.write_text(dump(notebook(kept, old.get("metadata", {}).get("workbench"))))
                print("wrote", path, "(markdown only; outputs kept)")
                continue
            if any(c.get("outputs") for c in old_cells):
                print(f"{path}: cells changed, outputs cleared; `bash scripts/reproduce --only notebooks` "
                      "executes it again")
        path.write_text(dump(notebook(cells)))
        print("wrote", path)


def clean_outputs(cell):
    """An executed cell as committed: its outputs and count, none of nbconvert's timing metadata."""
    c = {k: v for k, v in cell.items() if k != "metadata"}
    c["metadata"] = {"tags": cell["metadata"]["tags"]} if cell.get("metadata", {}).get("tags") else {}
    return c


def adopt(executed_dir, scale, commit, here=HERE, today=None):
    """Copy each executed notebook over the committed one, stamped. Returns the problems."""
    problems = []
    for src in sources(here):
        executed = pathlib.Path(executed_dir) / (src.stem + ".ipynb")
        if not executed.exists():
            problems.append(f"{executed}: no executed copy to adopt")
            continue
        ran = json.loads(executed.read_text())
        cells = ran.get("cells", [])
        if shape(cells) != shape(cells_from_source(src)):
            problems.append(f"{executed}: its cells differ from {src} (executed from other sources); "
                            "not adopted")
            continue
        stamp = {"cells_sha256": cells_sha256(cells), "scale": scale, "commit": commit,
                 "executed": today or datetime.date.today().isoformat()}
        path = here / (src.stem + ".ipynb")
        path.write_text(dump(notebook([clean_outputs(c) for c in cells], stamp)))
        print(f"adopted {executed} -> {path} ({scale}, {commit})")
    return problems


def check(here=HERE, notices=None):
    """Problems of the committed notebooks, one line each. A notebook with no outputs at all
    (never executed) is a problem too unless `notices` is a list: then it is reported there
    (it claims no outputs, so none can come from other cells)."""
    problems = []
    for src in sources(here):
        path = here / (src.stem + ".ipynb")
        if not path.exists():
            problems.append(f"{path}: missing (python3 notebooks/make_notebooks.py writes it)")
            continue
        if path.stat().st_size > MAX_BYTES:
            problems.append(f"{path}: {path.stat().st_size} bytes, over {MAX_BYTES}")
        nb = json.loads(path.read_text())
        cells = nb.get("cells", [])
        if shape(cells) != shape(cells_from_source(src)):
            problems.append(f"{path}: its cells differ from {src} (python3 notebooks/make_notebooks.py, "
                            "then bash scripts/reproduce --only notebooks)")
            continue
        code = [c for c in cells if c.get("cell_type") == "code"]
        unrun = [c.get("id") for c in code if c.get("execution_count") is None]
        if unrun:
            line = (f"{path}: not executed ({len(unrun)} of {len(code)} code cells have no execution "
                    f"count, the first {unrun[0]}; bash scripts/reproduce --only notebooks)")
            has_outputs = any(c.get("outputs") for c in code)
            if notices is not None and len(unrun) == len(code) and not has_outputs:
                notices.append(line)
            else:
                problems.append(line)
            continue
        if not any(c.get("outputs") for c in code):
            problems.append(f"{path}: executed but shows no output")
        stamp = nb.get("metadata", {}).get("workbench", {})
        if stamp.get("cells_sha256") != cells_sha256(cells):
            problems.append(f"{path}: its outputs are not stamped for these cells "
                            f"(metadata.workbench.cells_sha256 {stamp.get('cells_sha256')!r}); "
                            "outputs must come from an execution of the committed cells")
    return problems


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    g = p.add_mutually_exclusive_group()
    g.add_argument("--adopt", metavar="DIR", help="executed notebooks to commit (data/results/notebooks)")
    g.add_argument("--check", action="store_true", help="check the committed notebooks")
    p.add_argument("--allow-unexecuted", action="store_true",
                   help="with --check: list a notebook without any output instead of failing on it")
    p.add_argument("--scale", default="quick")
    p.add_argument("--commit", default="unknown")
    a = p.parse_args(argv)
    if a.check:
        notices = [] if a.allow_unexecuted else None
        found = check(notices=notices)
        for line in found:
            print(line)
        for line in notices or []:
            print("notice:", line)
        n = len(sources())
        bad = len({f.split(':')[0] for f in found})
        print(f"committed notebooks: {n - bad - len(notices or [])} of {n} show outputs of their own cells, "
              f"{len(notices or [])} not executed, {bad} failed")
        return 1 if found else 0
    if a.adopt:
        found = adopt(a.adopt, a.scale, a.commit)
        for line in found:
            print(line)
        return 1 if found else 0
    write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
