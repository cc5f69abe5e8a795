"""Self-test of scripts/check_notebook.py on crafted executed notebooks (run by scripts/test).

    python3 scripts/test_check_notebook.py
"""
import contextlib
import io
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, str(pathlib.Path(__file__).parent))
sys.path.insert(0, str(pathlib.Path(__file__).parent.parent / "notebooks"))
import check_notebook  # noqa: E402
import make_notebooks  # noqa: E402

# A panic as evcxr shows it: Rust's panic message on the stderr stream, no error output.
PANIC = ("thread '<unnamed>' panicked at /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/"
         "onig-6.5.3/src/lib.rs:512:13:\nRegex encoding does not match haystack encoding (0x1, 0x2)\n"
         "note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n")


def code(source, *outputs, tags=()):
    cell = {"cell_type": "code", "id": f"c{len(source)}", "metadata": {}, "source": source,
            "outputs": list(outputs), "execution_count": 1}
    if tags:
        cell["metadata"]["tags"] = list(tags)
    return cell


def stream(name, text):
    return {"output_type": "stream", "name": name, "text": text}


def display(mime, text):
    return {"output_type": "display_data", "data": {mime: text}, "metadata": {}}


def notebook(*cells):
    return {"cells": [{"cell_type": "markdown", "id": "md", "metadata": {}, "source": "# t"}] + list(cells),
            "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


CLEAN = [
    code(":dep workbench = { path = \"../workbench\" }"),
    code("let reader = load();", stream("stdout", "loaded qwen2.5-coder-0.5b-instruct-gguf in 1.2 s\n")),
    code("reader.read(q)?", stream("stdout", "reading: 100%|####| 1/1 [00:01<00:00]\n"),
         {"output_type": "execute_result", "execution_count": 3, "metadata": {},
          "data": {"text/plain": "Answer { text: \"Paris\" }", "text/html": "<table><tr><td>Paris</td></tr></table>"}}),
    code("plot()", display("image/png", "iVBORw0KGgo="), tags=("figure",)),
]


class CheckNotebook(unittest.TestCase):
    def assertFails(self, nb, cell_index, *words):
        found = check_notebook.problems(nb)
        self.assertTrue(found, "the check missed the failing cell")
        text = "\n".join(found)
        self.assertIn(f"cell {cell_index} ", text)
        for w in words:
            self.assertIn(w, text)

    def test_clean_notebook_passes(self):
        self.assertEqual(check_notebook.problems(notebook(*CLEAN)), [])

    def test_panic_on_stderr_fails_and_names_the_cell(self):
        nb = notebook(*CLEAN[:2], code("let answer = reader.read(&q, &contexts)?;", stream("stderr", PANIC)), *CLEAN[2:])
        self.assertFails(nb, 3, "stderr stream", "panicked", "reader.read")

    def test_panic_in_many_stderr_chunks_is_reported_once(self):
        # evcxr sends a panic and its backtrace as many stderr stream outputs.
        chunks = ["\n", PANIC.splitlines(keepends=True)[0], "Regex encoding does not match\n", "stack backtrace:\n",
                  "   0: __rustc::rust_begin_unwind\n", "   1: onig::Regex::search_with_encoding\n",
                  PANIC.splitlines(keepends=True)[0]]
        nb = notebook(*CLEAN[:2], code("let a = reader.read(&q, &c)?;", *[stream("stderr", c) for c in chunks]))
        found = check_notebook.problems(nb)
        self.assertEqual(len(found), 1, found)
        self.assertFails(nb, 3, "stderr stream", "panicked at")

    def test_panic_split_over_stdout_lines_fails(self):
        nb = notebook(code("f()", stream("stdout", ["thread 'main' ", "panicked at 'boom', src/lib.rs:1:1\n"])))
        self.assertFails(nb, 1, "stdout stream")

    def test_any_stderr_text_fails(self):
        # evcxr prints an error returned by a cell's `?` on stderr and goes on to the next cell.
        for text in ["Error: no such asset: qwen2.5-coder-0.5b-instruct-gguf\n", ["progress ", "1/2\n"], "\n"]:
            nb = notebook(*CLEAN[:2], code("reader.read(q)?", stream("stderr", text)), *CLEAN[2:])
            self.assertFails(nb, 3, "wrote to stderr", "reader.read")

    def test_backtrace_hint_alone_fails(self):
        nb = notebook(code("f()", stream("stderr", "note: run with `RUST_BACKTRACE=1` environment variable\n")))
        self.assertFails(nb, 1, "RUST_BACKTRACE")

    def test_panic_in_display_data_text_fails(self):
        for mime in ["text/plain", "text/html"]:
            nb = notebook(*CLEAN[:1], code("t", display(mime, ["<pre>", PANIC, "</pre>"])))
            self.assertFails(nb, 2, mime)

    def test_error_output_fails(self):
        nb = notebook(code("let x: u8 = \"a\";", {"output_type": "error", "ename": "Error",
                                                   "evalue": "mismatched types", "traceback": []}))
        self.assertFails(nb, 1, "mismatched types")

    def test_evcxr_markers_fail(self):
        for text in ["Subprocess terminated with status: signal: 6 (SIGABRT)",
                     "A type redefinition resulted in the following variables being lost: reader"]:
            nb = notebook(code("f()", stream("stderr", text + "\n")))
            self.assertFails(nb, 1, text.split(":")[0])

    def test_unexecuted_cell_fails_even_without_outputs(self):
        unexecuted = code("let table = reader.table();")
        unexecuted["execution_count"] = None
        self.assertFails(notebook(*CLEAN[:2], unexecuted, *CLEAN[2:]), 3, "not executed")
        blank = code("  \n")
        blank["execution_count"] = None
        self.assertEqual(check_notebook.problems(notebook(*CLEAN, blank)), [])

    def test_figure_without_image_fails(self):
        nb = notebook(code("plot()", stream("stdout", "no image"), tags=("figure",)))
        self.assertFails(nb, 1, "figure")

    def test_debug_dump_of_a_hooked_type_fails(self):
        dump = {"output_type": "execute_result", "execution_count": 2, "metadata": {},
                "data": {"text/plain": 'Table { caption: Some("t"), header: ["a"], rows: [] }'}}
        nb = notebook(*CLEAN[:1], code("f()?.table()", dump))
        self.assertFails(nb, 2, "Debug dump", "Table")
        # The same value shown through its hook (HTML beside the plain text) passes, and so
        # does a Debug dump of a type without a hook.
        shown = dict(dump, data=dict(dump["data"], **{"text/html": "<table></table>"}))
        self.assertEqual(check_notebook.problems(notebook(*CLEAN[:1], code("t", shown))), [])
        plain = dict(dump, data={"text/plain": 'Answer { text: "Paris" }'})
        self.assertEqual(check_notebook.problems(notebook(*CLEAN[:1], code("a", plain))), [])
        # Every hooked type, pretty-printed or inside a tuple / Ok / list, and as display data.
        for kind in ("execute_result", "display_data"):
            for text in ["Figure {\n    png: [],\n}", "(Table { caption: None }, Table { caption: None })",
                         "Ok(Bm25Explanation { terms: [] })", "[TfIdfExplanation { terms: [] }]",
                         "\nTokenRelevance {\n    tokens: [],\n}", "shape: (3, 2)\n┌─────┐"]:
                out = {"output_type": kind, "metadata": {}, "data": {"text/plain": text}}
                if kind == "execute_result":
                    out["execution_count"] = 2
                found = check_notebook.problems(notebook(code("x", out)))
                self.assertTrue(found and "Debug dump" in found[0], (kind, text, found))
        # A type whose name merely ends in a hooked name is not one.
        other = dict(dump, data={"text/plain": "MyTable { rows: [] }"})
        self.assertEqual(check_notebook.problems(notebook(code("m", other))), [])

    def test_absolute_checkout_path_fails(self):
        nb = notebook(code("println!(dir)", stream("stdout", "/home/me/rag-workbench/data/results/report001\n")))
        found = check_notebook.problems(nb, root="/home/me/rag-workbench")
        self.assertTrue(found and "absolute path" in found[0], found)
        self.assertEqual(check_notebook.problems(nb, root="/elsewhere"), [])
        # The command line checks the path of the directory it runs in (the executing checkout).
        script = pathlib.Path(__file__).parent / "check_notebook.py"
        with tempfile.TemporaryDirectory() as d:
            shown = notebook(code("println!(dir)", stream("stdout", os.path.realpath(d) + "/data/results/x\n")))
            path = os.path.join(d, "nb.ipynb")
            with open(path, "w") as f:
                json.dump(shown, f)
            run = subprocess.run([sys.executable, str(script), path], capture_output=True, text=True,
                                 cwd=os.path.realpath(d))
            self.assertEqual(run.returncode, 1, run.stdout + run.stderr)
            self.assertIn("absolute path", run.stdout)

    def test_command_line_exit_status(self):
        script = pathlib.Path(__file__).parent / "check_notebook.py"
        with tempfile.TemporaryDirectory() as d:
            for name, nb, status in [("ok.ipynb", notebook(*CLEAN), 0),
                                     ("panic.ipynb", notebook(code("r.read()", stream("stderr", PANIC))), 1),
                                     ("stdout-panic.ipynb", notebook(code("r.read()", stream("stdout", PANIC))), 1),
                                     ("stderr.ipynb", notebook(code("r.read()?", stream("stderr", "Error: x\n"))), 1)]:
                path = os.path.join(d, name)
                with open(path, "w") as f:
                    json.dump(nb, f)
                run = subprocess.run([sys.executable, str(script), path], capture_output=True, text=True)
                self.assertEqual(run.returncode, status, run.stdout + run.stderr)
                if status:
                    self.assertIn("FAILED", run.stdout)
                    self.assertIn("cell 1 ", run.stdout)


SOURCE = """CELLS = [
    ("markdown", "# t"),
    ("code", "let x = 1;\\nx + 1", "figure"),
]
"""


class CommittedNotebooks(unittest.TestCase):
    """make_notebooks.py: writing keeps outputs only for unchanged cells; --adopt stamps; --check."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.here = pathlib.Path(self.tmp.name)
        (self.here / "src").mkdir()
        (self.here / "src" / "t.py").write_text(SOURCE)
        self.runs = self.here / "runs"
        self.runs.mkdir()

    def tearDown(self):
        self.tmp.cleanup()

    def executed(self, edit=None):
        """An executed copy of t.ipynb as nbconvert writes it (outputs, counts, timing metadata)."""
        cells = make_notebooks.cells_from_source(self.here / "src" / "t.py")
        for c in cells:
            if c["cell_type"] == "code":
                c["execution_count"] = 1
                c["outputs"] = [display("image/png", "iVBORw0KGgo=")]
                c["metadata"]["execution"] = {"iopub.execute_input": "2026-11-26T00:00:00Z"}
        if edit:
            edit(cells)
        (self.runs / "t.ipynb").write_text(json.dumps(make_notebooks.notebook(cells)))

    def committed(self):
        return json.loads((self.here / "t.ipynb").read_text())

    def test_fresh_notebook_is_not_executed(self):
        with contextlib.redirect_stdout(io.StringIO()):
            make_notebooks.write(self.here)
        found = make_notebooks.check(self.here)
        self.assertEqual(len(found), 1)
        self.assertIn("not executed", found[0])
        # Allowed: listed as a notice, not a failure.
        notices = []
        self.assertEqual(make_notebooks.check(self.here, notices), [])
        self.assertEqual(len(notices), 1)
        self.assertIn("not executed", notices[0])

    def test_partly_executed_notebook_fails_even_when_unexecuted_ones_are_allowed(self):
        self.executed(lambda cells: cells[1].update(execution_count=None))
        # A copy with outputs but no count: adopt it by hand, as an edit would leave it.
        ran = json.loads((self.runs / "t.ipynb").read_text())
        (self.here / "t.ipynb").write_text(json.dumps(ran))
        found = make_notebooks.check(self.here, [])
        self.assertEqual(len(found), 1)
        self.assertIn("not executed", found[0])

    def test_adopted_notebook_passes_and_keeps_outputs_on_rewrite(self):
        self.executed()
        with contextlib.redirect_stdout(io.StringIO()):
            self.assertEqual(make_notebooks.adopt(self.runs, "quick", "abc1234", self.here, "2026-11-26"), [])
        self.assertEqual(make_notebooks.check(self.here), [])
        nb = self.committed()
        self.assertEqual(nb["metadata"]["workbench"]["scale"], "quick")
        code = nb["cells"][1]
        self.assertEqual(code["metadata"], {"tags": ["figure"]})  # timing metadata dropped
        with contextlib.redirect_stdout(io.StringIO()):
            make_notebooks.write(self.here)
        self.assertEqual(self.committed(), nb)

    def test_changed_source_clears_outputs_and_fails_until_executed(self):
        self.executed()
        with contextlib.redirect_stdout(io.StringIO()):
            make_notebooks.adopt(self.runs, "quick", "abc1234", self.here, "2026-11-26")
        (self.here / "src" / "t.py").write_text(SOURCE.replace("x + 1", "x + 2"))
        found = make_notebooks.check(self.here)
        self.assertEqual(len(found), 1)
        self.assertIn("differ from", found[0])
        with contextlib.redirect_stdout(io.StringIO()):
            make_notebooks.write(self.here)
        self.assertEqual(self.committed()["cells"][1]["outputs"], [])
        self.assertIn("not executed", make_notebooks.check(self.here)[0])

    def test_changed_markdown_keeps_outputs_and_stamp(self):
        self.executed()
        with contextlib.redirect_stdout(io.StringIO()):
            make_notebooks.adopt(self.runs, "quick", "abc1234", self.here, "2026-11-26")
        before = self.committed()
        (self.here / "src" / "t.py").write_text(SOURCE.replace("# t", "# t, at the quick scale"))
        self.assertIn("differ from", make_notebooks.check(self.here)[0])
        with contextlib.redirect_stdout(io.StringIO()):
            make_notebooks.write(self.here)
        nb = self.committed()
        self.assertEqual(nb["cells"][0]["source"], ["# t, at the quick scale"])
        self.assertEqual(nb["cells"][1], before["cells"][1])
        self.assertEqual(nb["metadata"]["workbench"], before["metadata"]["workbench"])
        self.assertEqual(make_notebooks.check(self.here), [])

    def test_outputs_from_other_cells_fail(self):
        self.executed()
        with contextlib.redirect_stdout(io.StringIO()):
            make_notebooks.adopt(self.runs, "quick", "abc1234", self.here, "2026-11-26")
        nb = self.committed()
        nb["metadata"]["workbench"]["cells_sha256"] = "0" * 64
        (self.here / "t.ipynb").write_text(json.dumps(nb))
        found = make_notebooks.check(self.here)
        self.assertEqual(len(found), 1)
        self.assertIn("not stamped for these cells", found[0])

    def test_adopt_refuses_a_copy_executed_from_other_sources(self):
        self.executed(lambda cells: cells[1].update(source=["x + 3"]))
        with contextlib.redirect_stdout(io.StringIO()):
            found = make_notebooks.adopt(self.runs, "quick", "abc1234", self.here, "2026-11-26")
        self.assertEqual(len(found), 1)
        self.assertIn("executed from other sources", found[0])
        self.assertFalse((self.here / "t.ipynb").exists())

    def test_missing_executed_copy_is_named(self):
        with contextlib.redirect_stdout(io.StringIO()):
            found = make_notebooks.adopt(self.runs, "quick", "abc1234", self.here, "2026-11-26")
        self.assertEqual(len(found), 1)
        self.assertIn("no executed copy", found[0])


if __name__ == "__main__":
    unittest.main()
