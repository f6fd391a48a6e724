#!/usr/bin/env python3
"""scripts/check_cli_functions.py: counts a function from the line of its opening brace to the line
of its closing one, ignores braces in comments, strings and initializers, passes a tree whose CLI
functions are all within the limit and fails (naming file, line and function) one that is not."""
import os
import subprocess
import sys
import tempfile

ROOT = os.environ.get("UFP4_SOURCE_DIR", os.path.join(os.path.dirname(__file__), ".."))
SCRIPT = os.path.join(ROOT, "scripts", "check_cli_functions.py")
sys.path.insert(0, os.path.dirname(SCRIPT))
import check_cli_functions  # noqa: E402


def body(n):
    """A function whose body spans n lines, brace to brace."""
    return "int f%d(void) {\n" % n + "  x++;\n" * (n - 2) + "}\n"


def run(files):
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(os.path.join(d, "src", "cli"))
        for name, text in files.items():
            open(os.path.join(d, "src", "cli", name), "w").write(text)
        return subprocess.run([sys.executable, SCRIPT, d], capture_output=True, text=True)


def main():
    failures = 0
    counted = {
        "one line": ("static int g(int a) { return a; }\n", [("g", 1, 1)]),
        "brace to brace": (
            "/* c\n * c */\nint\nmain(int argc,\n     char **argv)\n{\n  return 0;\n}\n",
            [("main", 6, 3)]),
        "initializer is no function": (
            "static const int t[] = {\n1,\n2,\n};\nvoid h(void) {}\n", [("h", 5, 1)]),
        "braces in comments and strings": (
            'void s(void) {\n  puts("{{");  /* { */\n  // {\n  c = \'{\';\n}\n', [("s", 1, 5)]),
        "struct then function": (
            "typedef struct {\n  int a;\n} t;\n#define X {\nint k(t *p) {\n  return 1;\n}\n",
            [("k", 5, 3)]),
    }
    for name, (src, want) in counted.items():
        got = check_cli_functions.functions(src)
        if got != want:
            print(f"count '{name}': got {got}, want {want}")
            failures += 1
    limit = check_cli_functions.MAX_LINES
    cases = {
        "at the limit": ({"a.c": body(limit)}, 0, None),
        "one over": ({"a.c": body(5) + "\n" + body(limit + 1)}, 1,
                     f"src/cli/a.c:7: f{limit + 1} is {limit + 1}"),
        "headers are not checked": ({"a.h": body(limit + 5)}, 0, None),
    }
    for name, (files, want, where) in cases.items():
        r = run(files)
        if r.returncode != want or (where and where not in r.stdout):
            print(f"case '{name}': exit {r.returncode} (want {want}), output:\n"
                  f"{r.stdout}{r.stderr}")
            failures += 1
    n = len(counted) + len(cases)
    print(f"{n - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
