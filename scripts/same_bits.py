#!/usr/bin/env python3
"""Whether the runs of two compare folders computed the same bits, without showing any result.

    scripts/same_bits.py REF_DIR NEW_DIR [RUN ...]

For each run (RUN as runs/<recipe>/seed<N>; by default every run folder of NEW_DIR that has a
run.json): metrics.jsonl with the timing fields (tokens_per_s, ms_per_step, comm_ms) taken out,
diagnostics.jsonl, config.json, and run.json's steps_done, skipped_steps, final_loss and
final_val_loss must be equal byte for byte / value for value. Prints one line per run, "same"
or "DIFFERENT" with the first file that differs, never a value: the study's runs stay blinded
(docs/STUDY.md, section 10). Exit status 0 when every run is the same, 1 otherwise, 2 on a usage
error or a run missing from REF_DIR.
"""
import json
import os
import re
import sys

TIMING = re.compile(r',"(tokens_per_s|ms_per_step|comm_ms)":[^,}]*')  # metrics.h's timing fields
RESULT_KEYS = ("state", "steps_done", "skipped_steps", "final_loss", "final_val_loss")


def metrics(path):
    with open(path, "rb") as f:
        return TIMING.sub("", f.read().decode())


def raw(path):
    with open(path, "rb") as f:
        return f.read()


def result(path):
    with open(path) as f:
        j = json.load(f)
    return tuple(j.get(k) for k in RESULT_KEYS)


def first_difference(ref, new):
    """The name of the first file that differs between run folders ref and new, or None."""
    checks = (("config.json", raw), ("metrics.jsonl", metrics), ("diagnostics.jsonl", raw),
              ("run.json", result))
    for name, read in checks:
        a, b = os.path.join(ref, name), os.path.join(new, name)
        if not os.path.exists(b):
            return name + " (missing in the new run)"
        if not os.path.exists(a):
            return name + " (missing in the reference run)"
        if read(a) != read(b):
            return name
    return None


def runs_of(top):
    found = []
    for dirpath, _, files in os.walk(os.path.join(top, "runs")):
        if "run.json" in files:
            found.append(os.path.relpath(dirpath, top))
    return sorted(found)


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    ref, new = argv[1], argv[2]
    runs = argv[3:] or runs_of(new)
    if not runs:
        print(f"same_bits: no run folder with a run.json under {new}/runs", file=sys.stderr)
        return 2
    bad = 0
    for run in runs:
        a, b = os.path.join(ref, run), os.path.join(new, run)
        if not os.path.isdir(a):
            print(f"same_bits: {a}: no such run in the reference", file=sys.stderr)
            return 2
        diff = first_difference(a, b)
        print(f"{run}: " + ("same" if diff is None else f"DIFFERENT ({diff})"))
        bad += diff is not None
    print(f"{len(runs) - bad} of {len(runs)} runs the same")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
