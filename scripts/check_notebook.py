"""Check an executed notebook: no error outputs, nothing written to stderr (evcxr prints an
error returned by a cell's `?` there instead of failing the cell), and every cell tagged
`figure` produced an image. Exit 1 on failure."""
import json
import sys

path = sys.argv[1]
nb = json.load(open(path))
errors, images, cells = [], 0, 0
for i, cell in enumerate(nb["cells"]):
    if cell["cell_type"] != "code":
        continue
    cells += 1
    for out in cell.get("outputs", []):
        if out.get("output_type") == "error":
            errors.append(f"cell {i}: {out.get('ename')}: {out.get('evalue')}")
        if out.get("output_type") == "stream" and out.get("name") == "stderr":
            text = "".join(out.get("text", "")).strip()
            errors.append(f"cell {i}: wrote to stderr: {text[:300]}")
        data = out.get("data", {})
        if "image/png" in data or "image/svg+xml" in data:
            images += 1
    if "figure" in cell.get("metadata", {}).get("tags", []):
        if not any(("image/png" in o.get("data", {})) for o in cell.get("outputs", [])):
            errors.append(f"cell {i}: tagged `figure` but produced no image")
if errors:
    print(f"{path}: FAILED\n  " + "\n  ".join(errors))
    sys.exit(1)
print(f"{path}: ok ({cells} code cells, {images} images)")
