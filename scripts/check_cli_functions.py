#!/usr/bin/env python3
"""Keeps the CLI thin: fails when a function in src/cli/*.c is longer than MAX_LINES lines.

A command is a thin cmd_* over library calls (git's model): it parses flags into an options
struct, calls the library and prints. A long function in src/cli/ is orchestration that only the
CLI can reach; move it into the library layer it belongs to.

How a function is counted: from the line of the opening brace of its body to the line of its
closing brace, both included, so a one-line function counts 1 and the header comment and the
signature lines before the brace do not count. Comments, string and character literals are blanked
first, so braces inside them do not count. A function is a brace at file level (depth 0) whose
preceding text, since the last file-level ';', '}' or preprocessor line, ends in ')' and holds no
'=' (which rules out initializers of tables and structs).

Usage: check_cli_functions.py [ROOT]; exit status 1 when a function is too long, each listed as
"src/cli/FILE.c:LINE: FUNC is N lines (at most MAX_LINES)"."""
import os
import re
import sys

MAX_LINES = 80


def blank_comments_and_strings(text):
    """The text with comments, strings and character literals replaced by spaces, newlines kept."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
        else:
            out.append(c)
            i += 1
            continue
        out.append(re.sub(r"[^\n]", " ", text[i:j]))
        i = j
    return "".join(out)


def blank_preprocessor(text):
    """Preprocessor lines (with their continuations) replaced by ';' and spaces: a boundary."""
    lines = text.split("\n")
    cont = False
    for k, line in enumerate(lines):
        if cont or line.lstrip().startswith("#"):
            cont = line.endswith("\\")
            lines[k] = ";" + " " * max(len(line) - 1, 0)
    return "\n".join(lines)


def functions(text):
    """(name, first line, line count) of each function definition in C source `text`."""
    code = blank_preprocessor(blank_comments_and_strings(text))
    found = []
    depth, start, head = 0, 0, []
    line = 1
    for c in code:
        if c == "\n":
            line += 1
        if c == "{":
            if depth == 0:
                start = line
                sig = "".join(head).strip()
                is_function = sig.endswith(")") and "=" not in sig
                m = re.search(r"(\w+)\s*\(", sig) if is_function else None
                name = m.group(1) if m else None
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                if name:
                    found.append((name, start, line - start + 1))
                head = []
        elif depth == 0:
            if c == ";":
                head = []
            else:
                head.append(c)
    return found


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    cli = os.path.join(root, "src", "cli")
    errors = []
    for f in sorted(os.listdir(cli)):
        if not f.endswith(".c"):
            continue
        text = open(os.path.join(cli, f), encoding="utf-8").read()
        for name, start, n in functions(text):
            if n > MAX_LINES:
                errors.append(f"src/cli/{f}:{start}: {name} is {n} lines (at most {MAX_LINES})")
    for e in errors:
        print(e)
    if errors:
        print(f"check_cli_functions: {len(errors)} function(s) in src/cli/ over {MAX_LINES} lines; "
              "move the orchestration into the library and keep the command a thin "
              "parse-call-print")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
