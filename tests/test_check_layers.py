#!/usr/bin/env python3
"""scripts/check_layers.py: passes on the tree, and fails on a tree where a lower layer includes a
header of a higher one (public or internal), or where a public header has no layer."""
import os
import subprocess
import sys
import tempfile

ROOT = os.environ.get("UFP4_SOURCE_DIR", os.path.join(os.path.dirname(__file__), ".."))
SCRIPT = os.path.join(ROOT, "scripts", "check_layers.py")


def run(root):
    return subprocess.run([sys.executable, SCRIPT, root], capture_output=True, text=True)


def fake_tree(d, files):
    layers = "\n".join(["ufp4_layer(core)", "ufp4_layer(formats DEPS core)", "ufp4_layer(transforms DEPS core)",
                        "ufp4_layer(quant DEPS transforms formats core)", "ufp4_layer(linear DEPS quant core)",
                        "ufp4_layer(model DEPS linear core)", "ufp4_layer(analysis DEPS model core)",
                        "ufp4_layer(io DEPS core)", "ufp4_layer(data DEPS core)", "ufp4_layer(dist DEPS core)",
                        "ufp4_layer(parity DEPS analysis io core)",
                        "ufp4_layer(training DEPS analysis core)", "ufp4_layer(report DEPS training core)"])
    open(os.path.join(d, "CMakeLists.txt"), "w").write(layers + "\n")
    os.makedirs(os.path.join(d, "include/ufp4"))
    for h in ["error.h", "quant.h", "model.h"]:
        open(os.path.join(d, "include/ufp4", h), "w").write("")
    for path, text in files.items():
        os.makedirs(os.path.dirname(os.path.join(d, path)), exist_ok=True)
        open(os.path.join(d, path), "w").write(text)


def main():
    failures = 0
    r = run(ROOT)
    if r.returncode != 0:
        print("the tree violates its layers:\n" + r.stdout)
        failures += 1
    cases = {
        "clean": ({"src/quant/a.c": '#include "ufp4/error.h"\n#include "ufp4/quant.h"\n'}, 0, None),
        "public header of a higher layer": ({"src/quant/a.c": '#include "ufp4/model.h"\n'}, 1, "src/quant/a.c:1"),
        "internal header of a higher layer": ({"src/core/x86/a.c": '#include "linear/t.h"\n'}, 1, "src/core/x86/a.c:1"),
        "sibling not listed": ({"src/io/a.c": '\n#include "data/x.h"\n'}, 1, "src/io/a.c:2"),
        "unowned public header": ({"include/ufp4/new.h": "", "src/core/a.c": ""}, 1, "include/ufp4/new.h"),
        "cli may use anything": ({"src/cli/a.c": '#include "ufp4/model.h"\n'}, 0, None),
    }
    for name, (files, want, where) in cases.items():
        with tempfile.TemporaryDirectory() as d:
            fake_tree(d, files)
            r = run(d)
            if r.returncode != want or (where and where not in r.stdout):
                print(f"case '{name}': exit {r.returncode} (want {want}), output:\n{r.stdout}{r.stderr}")
                failures += 1
    n = len(cases) + 1
    print(f"{n - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
