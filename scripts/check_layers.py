#!/usr/bin/env python3
"""The include half of the layer check (cmake/layers.cmake does the link half).

Reads the layers and the layers each may use from the ufp4_layer(...) lines of CMakeLists.txt, the
one place they are declared, and fails when a file under src/LAYER/ includes a header of a layer
that LAYER does not list: a public header (include/ufp4/X.h, mapped to its layer below) or an
internal one (src/OTHER/...). Every public header must be in the map, so a new header is placed in
a layer on purpose. src/cli/ may include anything: it is the top. Exit status 1 on a violation."""
import os
import re
import sys

ROOT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")

# Which layer owns each public header. ufp4.h is the umbrella header for users (it includes
# headers of several layers), so it belongs to the top library layer.
PUBLIC = {
    "core": "error fileio jsonnum parallel philox version export",
    "formats": "grid minifloat",
    "transforms": "rht",
    "quant": "quant",
    "linear": "gemm linear recipe stream",
    "model": "layers model moe",
    "analysis": "measures synth stats diagnostics drift bias_table power capi guard",
    "io": "npy safetensors gguf",
    "data": "tokenizer corpus shard loader",
    "dist": "dist",
    "parity": "golden",
    "training": "train checkpoint data_source sample optim model_io export_hf gguf_export",
    "report": "report plot compare sweep study ufp4",
}


def layers_from_cmake():
    text = open(os.path.join(ROOT, "CMakeLists.txt")).read()
    deps = {}
    for m in re.finditer(r"^ufp4_layer\((\w+)([^)]*)\)", text, re.M):
        words = m.group(2).split()
        deps[m.group(1)] = set(words[1:]) if words and words[0] == "DEPS" else set()
    return deps


def main():
    deps = layers_from_cmake()
    owner = {}
    for layer, names in PUBLIC.items():
        if layer not in deps:
            print(f"check_layers: scripts/check_layers.py maps headers to layer '{layer}', which CMakeLists.txt does not declare")
            return 1
        for n in names.split():
            owner[n + ".h"] = layer
    errors = []
    for h in sorted(os.listdir(os.path.join(ROOT, "include/ufp4"))):
        if h.endswith(".h") and h not in owner:
            errors.append(f"include/ufp4/{h}: no layer owns it; add it to PUBLIC in scripts/check_layers.py")
    for layer in sorted(os.listdir(os.path.join(ROOT, "src"))):
        if layer == "cli" or not os.path.isdir(os.path.join(ROOT, "src", layer)):
            continue
        if layer not in deps:
            errors.append(f"src/{layer}/: a folder that is no layer in CMakeLists.txt")
            continue
        allowed = deps[layer] | {layer}
        for dirpath, _, files in os.walk(os.path.join(ROOT, "src", layer)):
            for f in sorted(files):
                if not f.endswith((".c", ".h")):
                    continue
                path = os.path.join(dirpath, f)
                rel = os.path.relpath(path, ROOT)
                for no, line in enumerate(open(path, encoding="utf-8"), 1):
                    m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                    if not m:
                        continue
                    inc = m.group(1)
                    if inc.startswith("ufp4/"):
                        target = owner.get(inc[5:])
                        if target is None:
                            errors.append(f"{rel}:{no}: includes {inc}, which is not in include/ufp4/")
                            continue
                    elif "/" in inc:
                        target = inc.split("/")[0]
                    else:
                        continue  # a header next to the file
                    if target not in allowed:
                        errors.append(f"{rel}:{no}: layer '{layer}' includes {inc} of layer '{target}', "
                                      f"which it may not use (its DEPS: {' '.join(sorted(deps[layer])) or 'none'})")
    for e in errors:
        print(e)
    print(f"check_layers: {len(deps)} layers, {len(errors)} violation(s)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
