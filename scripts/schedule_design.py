#!/usr/bin/env python3
"""The depth L and seed count N of the final-BF16-phase measurement (docs/RESULTS.md section 4),
by the rule registered there, from the depth study's final analysis.

    scripts/schedule_design.py [ANALYSIS]      ANALYSIS = reports/study/final/analysis.json

The rule, made exact on 2026-12-02 before any result of the study was read:
- L is the deepest depth at which e2m1's gap to bf16 is significant: the study's depth-series row of
  e2m1 at that depth (`series`, the per-seed relative error 100 (L_e2m1 - L_bf16) / L_bf16 in pp,
  its two-sided paired t over the seeds) has p < 0.05. One test per depth, uncorrected: this picks
  a design, it is not a reported result.
- N is the smallest n >= 2 whose paired t test (two-sided, alpha 0.05) has power >= 0.8 for an
  effect of half that row's mean and the row's own sd over seeds (ufp4_paired_n of the library,
  the function `ufp4 study` and `compare` use). The effect the measurement tests, L_q - L_q->bf16,
  is the part of the gap the bf16 phase removes; half the gap is the registered target. Its sd is
  not known before the runs, and the gap's own sd stands in for it.
- N is capped at 24, the study's cap; when the cap binds, the minimum detectable effect at 24 seeds
  is printed beside it.
- When no depth has a significant e2m1 gap, R cannot be reported at any depth (section 4 reports R
  only where the gap is significant); the measurement then runs at the deepest depth with the
  study's final n, to measure L_q - L_q->bf16 alone.

Prints the reasoning and, last, the command: `scripts/study_followup.sh schedule L N`. Exit 0, or 2
when the file is missing, not the study's analysis (no e2m1 series), or the library is not found
($UFP4_LIBRARY, else build/libufp4.so next to scripts/)."""
import ctypes
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import study_common  # noqa: E402
from study_common import finite, library, read_json_object  # noqa: E402

ALPHA, POWER, N_CAP = 0.05, 0.8, 24


def fail(msg):
    study_common.fail("schedule_design", msg)


def design(analysis, lib):
    """(L, N, lines of reasoning) for an analysis.json object."""
    series = {s.get("recipe"): s for s in analysis.get("series", []) if isinstance(s, dict)}
    e2m1 = series.get("e2m1")
    if not e2m1 or not isinstance(e2m1.get("depths"), list) or not e2m1["depths"]:
        raise ValueError("no depth series of e2m1 (not the study's final analysis?)")
    rows = []
    for row in e2m1["depths"]:
        t = row.get("rel_err") if isinstance(row, dict) else None
        if not isinstance(row.get("depth"), int) or not isinstance(t, dict):
            raise ValueError("a series row without depth or rel_err")
        rows.append((row["depth"], t))
    rows.sort(key=lambda r: r[0])
    why = []
    for depth, t in rows:
        why.append("L=%d: e2m1 gap %s pp, sd %s, p %s, n %s" % (depth, t.get("mean"), t.get("sd"), t.get("p"), t.get("n")))
    significant = [(d, t) for d, t in rows if t.get("valid") and finite(t.get("p")) and t["p"] < ALPHA
                   and finite(t.get("mean")) and finite(t.get("sd")) and t["sd"] > 0 and t["mean"] != 0]
    if not significant:
        n_final = analysis.get("power", {}).get("n")
        if not isinstance(n_final, int) or n_final < 2:
            raise ValueError("no power.n (the study's final n)")
        why.append("no depth has a significant e2m1 gap (p < %g): R is not reported; L = the deepest depth, "
                   "N = the study's n" % ALPHA)
        return rows[-1][0], min(n_final, N_CAP), why
    depth, t = significant[-1]
    effect = t["mean"] / 2
    n = ctypes.c_size_t(0)
    rc = lib.ufp4_paired_n(effect, t["sd"], ALPHA, POWER, 100000, ctypes.byref(n))
    if rc != 0:
        raise ValueError("ufp4_paired_n(%r, %r) failed (%d)" % (effect, t["sd"], rc))
    why.append("deepest significant: L=%d; target effect %.6g pp (half the gap), sd %.6g pp: n = %d for power %g"
               % (depth, effect, t["sd"], n.value, POWER))
    N = max(2, n.value)
    if N > N_CAP:
        why.append("capped at %d seeds: the MDD there is %.6g pp" % (N_CAP, lib.ufp4_paired_mdd(t["sd"], N_CAP, ALPHA, POWER)))
        N = N_CAP
    return depth, N, why


def main():
    if len(sys.argv) > 2 or (len(sys.argv) == 2 and sys.argv[1].startswith("-")):
        fail("usage: scripts/schedule_design.py [reports/study/final/analysis.json]")
    path = sys.argv[1] if len(sys.argv) == 2 else "reports/study/final/analysis.json"
    analysis = read_json_object("schedule_design", path)
    try:
        L, N, why = design(analysis, library("schedule_design"))
    except ValueError as e:
        fail("%s: %s" % (path, e))
    for line in why:
        print(line)
    print("scripts/study_followup.sh schedule %d %d" % (L, N))


if __name__ == "__main__":
    main()
