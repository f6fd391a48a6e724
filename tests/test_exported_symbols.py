#!/usr/bin/env python3
"""The shared library exports exactly the public API (include/ufp4/export.h).

    test_exported_symbols.py LIBUFP4.so LIBUFP4.a SOURCE_DIR

Fails (exit 1) when libufp4.so's dynamic symbol table (nm -D --defined-only) holds
  - a symbol not prefixed ufp4_ or UFP4_,
  - a symbol that no public header (include/ufp4/*.h) declares, e.g. one declared only in an
    internal header under src/ (the message names that header),
or when a function that a public header declares and libufp4.a defines is missing from it (a
header without UFP4_API_BEGIN/UFP4_API_END hides its functions). A self-test first runs the check
on made-up symbol tables, each with one such fault, and fails unless every fault is caught."""
import glob
import os
import re
import subprocess
import sys

PREFIXES = ("ufp4_", "UFP4_")
# Symbols the linker itself defines in every shared object on some binutils versions.
LINKER_SYMBOLS = {"_init", "_fini", "_edata", "_end", "__bss_start"}
# What the sanitizer builds (make sanitize, make fuzz) add: e.g. AddressSanitizer's ODR indicator
# __odr_asan.NAME beside each exported variable NAME.
INSTRUMENTATION = ("__odr_asan", "__asan", "__ubsan", "__sanitizer", "__sancov")


def nm_defined(path, dynamic):
    """The defined global symbols of path: {name: type letter}."""
    args = ["nm", "--defined-only", "--format=posix"] + (["-D"] if dynamic else ["-g"]) + [path]
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    syms = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2 and not parts[0].endswith(":"):
            syms[parts[0].split("@")[0]] = parts[1]
    return syms


def identifiers(texts):
    """{identifier: first file naming it} over {path: text}, comments removed."""
    where = {}
    for path, text in sorted(texts.items()):
        text = re.sub(r"/\*.*?\*/|//[^\n]*", " ", text, flags=re.S)
        for name in re.findall(r"\b[A-Za-z_]\w*\b", text):
            where.setdefault(name, path)
    return where


def declared_functions(texts):
    """Names a header declares as functions: NAME( not preceded by `static inline` bodies' use."""
    names = set()
    for text in texts.values():
        text = re.sub(r"/\*.*?\*/|//[^\n]*", " ", text, flags=re.S)
        text = re.sub(r"^\s*#.*$", " ", text, flags=re.M)  # macros (their bodies call functions)
        for m in re.finditer(r"^[A-Za-z_][\w \t\*]*?\b(ufp4_\w+)\s*\(", text, flags=re.M):
            if not re.match(r"\s*static\b", m.group(0)):
                names.add(m.group(1))
    return names


def check(exported, archive, public_texts, internal_texts):
    """Error messages; exported and archive map symbol -> nm type letter."""
    public = identifiers(public_texts)
    internal = identifiers(internal_texts)
    errors = []
    for name, kind in sorted(exported.items()):
        if name in LINKER_SYMBOLS or kind == "A" or name.startswith(INSTRUMENTATION):
            continue
        if not name.startswith(PREFIXES):
            errors.append(f"{name}: exported without the ufp4_/UFP4_ prefix")
        elif name not in public:
            where = f"declared only in {internal[name]}" if name in internal else "declared in no public header"
            errors.append(f"{name}: exported but {where}; the public API is include/ufp4/")
    for name in sorted(declared_functions(public_texts)):
        if archive.get(name) == "T" and name not in exported:
            errors.append(f"{name}: declared in {public[name]} and defined in libufp4.a, but not exported "
                          "(is the declaration between UFP4_API_BEGIN and UFP4_API_END?)")
    return errors


def self_test():
    pub = {"include/ufp4/a.h": "UFP4_API_BEGIN\nint ufp4_a(void);\nextern const int ufp4_table[];\n"
                               "static inline int ufp4_b(void) { return ufp4_a(); }\n#define M() ufp4_m()\n"}
    internal = {"src/core/x.h": "int ufp4_internal(void);\nint helper(void);\n"}
    good = {"ufp4_a": "T", "ufp4_table": "R", "_end": "A", "__odr_asan.ufp4_table": "B"}
    archive = {"ufp4_a": "T", "ufp4_internal": "T", "helper": "T", "ufp4_m": "T"}
    cases = [
        ("clean", good, archive, 0),
        ("unprefixed", {**good, "helper": "T"}, archive, 1),
        ("internal", {**good, "ufp4_internal": "T"}, archive, 1),
        ("undeclared", {**good, "ufp4_nowhere": "D"}, archive, 1),
        ("hidden public", {"ufp4_table": "R"}, archive, 1),
    ]
    ok = True
    for label, exported, arch, want in cases:
        errors = check(exported, arch, pub, internal)
        if len(errors) != want or (label == "internal" and "src/core/x.h" not in errors[0]):
            print(f"self-test '{label}': expected {want} error(s), got {errors}")
            ok = False
    return ok


def read_all(pattern, root):
    return {os.path.relpath(p, root): open(p, encoding="utf-8").read()
            for p in glob.glob(os.path.join(root, pattern), recursive=True)}


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    if not self_test():
        return 1
    so, archive, root = sys.argv[1:]
    exported = nm_defined(so, dynamic=True)
    errors = check(exported, nm_defined(archive, dynamic=False), read_all("include/ufp4/*.h", root),
                   read_all("src/**/*.h", root))
    for e in errors:
        print(f"{os.path.basename(so)}: {e}")
    n = sum(1 for k, v in exported.items() if k not in LINKER_SYMBOLS and v != "A" and not k.startswith(INSTRUMENTATION))
    print(f"{os.path.basename(so)}: {n} exported symbols, {len(errors)} problem(s)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
