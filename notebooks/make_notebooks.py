"""Write the notebooks from their cell lists (keeps the .ipynb JSON tidy and reviewable).

    python3 notebooks/make_notebooks.py

Each notebook's cells live in `notebooks/src/NAME.py` as a list `CELLS` of
`(kind, source, *tags)` tuples; `NAME.ipynb` is written from it. To add a notebook, add a
file there.
"""
import importlib.util
import json
import pathlib

HERE = pathlib.Path(__file__).parent


def nb(cells):
    out = []
    for i, (kind, src, *tags) in enumerate(cells):
        c = {"cell_type": kind, "id": f"cell-{i:02d}", "metadata": {},
             "source": src.strip("\n").splitlines(keepends=True)}
        if tags:
            c["metadata"]["tags"] = tags
        if kind == "code":
            c["outputs"] = []
            c["execution_count"] = None
        out.append(c)
    return {
        "cells": out,
        "metadata": {
            "kernelspec": {"display_name": "Rust", "language": "rust", "name": "rust"},
            "language_info": {"name": "Rust", "file_extension": ".rs", "mimetype": "text/rust",
                              "codemirror_mode": "rust", "pygment_lexer": "rust", "version": ""},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def main():
    for src in sorted((HERE / "src").glob("*.py")):
        spec = importlib.util.spec_from_file_location(src.stem, src)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        path = HERE / (src.stem + ".ipynb")
        path.write_text(json.dumps(nb(mod.CELLS), indent=1, ensure_ascii=False) + "\n")
        print("wrote", path)


if __name__ == "__main__":
    main()
