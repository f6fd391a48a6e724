#!/usr/bin/env python3
"""The recovered fractions of the final-BF16-phase measurement (docs/RESULTS.md section 4), from its
three registered `ufp4 study` analyses. Written on 2026-12-02, before any run of the measurement.

    scripts/schedule_recovery.py [--dir reports/schedule] [--out FILE.json]

reads DIR/analysis/analysis.json (the recovery: secondaries 'q vs q@0,bf16@0.9'), DIR/gaps/analysis.json
(the gaps: 'q vs bf16') and DIR/eval-q/analysis/analysis.json (the recovery with each scheduled run
evaluated again under its own 4-bit recipe q), for q = e2m1, ufp4, nvfp4. Each file's
per_seed.secondary holds, per seed s, 100 (L_x - L_y) / L_bf16,s for its 'x vs y' (docs/STUDY.md
section 9), so for each q:

- R_s = recovery_s / gap_s = (L_q - L_q->bf16) / (L_q - L_bf16), per seed, and R = mean(recovery) /
  mean(gap), the ratio of the two means over seeds, as registered. R is given only where the gap's
  test is significant (its Holm decision in the gaps analysis); otherwise "not reported", since a
  ratio over a gap inside the noise floor says nothing.
- R'_s and R', the same with the recovery evaluated under q (the training effect in q's precision).
- The precision effect, as registered: per seed, L_q->bf16 evaluated in bf16 (its own evaluation,
  the primary) minus L_q->bf16 evaluated under q, in pp of L_bf16,s; that is the fixed-precision
  recovery minus the primary recovery. Negative when the switched model scores a lower loss in bf16
  than under q. Its mean over seeds with a two-sided 95% t interval (Student's t quantile from
  libufp4, ufp4_t_quantile); no test (a decomposition of the primary effect, not a hypothesis).
  primary recovery = fixed-precision recovery - precision effect, seed by seed.

The three files must name the same seeds and the same single depth, and hold the three entries
each (in any order); anything else is an error naming the file. Prints a Markdown table and writes
the figures, per seed included, to --out (default DIR/recovery.json). Exit 0, or 2 on an error."""
import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import study_common  # noqa: E402
from study_common import finite, library, read_json_object  # noqa: E402

RECIPES = ("e2m1", "ufp4", "nvfp4")
SCHEDULED = "%s@0,bf16@0.9"


def fail(msg):
    study_common.fail("schedule_recovery", msg)


def load(path, reference):
    """(seeds, depths, {q: (per-seed values, test)}) of one analysis whose secondaries are 'q vs reference(q)'."""
    a = read_json_object("schedule_recovery", path)
    seeds, depths = a.get("seeds"), a.get("depths")
    if not isinstance(seeds, list) or len(seeds) < 2 or not all(isinstance(s, int) for s in seeds):
        fail("%s: no list of at least two seeds (not a `ufp4 study` analysis?)" % path)
    if not isinstance(depths, list) or len(depths) != 1:
        fail("%s: depths %r: the measurement has one depth" % (path, depths))
    sec, per = a.get("secondary"), (a.get("per_seed") or {}).get("secondary")
    if not isinstance(sec, list) or not isinstance(per, list) or len(sec) != len(per):
        fail("%s: no secondary tests with per-seed values (per_seed.secondary)" % path)
    out = {}
    for entry, values in zip(sec, per):
        if not isinstance(entry, dict) or not isinstance(values, list) or len(values) != len(seeds):
            fail("%s: a secondary entry without one value per seed" % path)
        for q in RECIPES:
            if entry.get("recipe") == q and entry.get("reference") == reference(q):
                if q in out:
                    fail("%s: '%s vs %s' twice" % (path, q, reference(q)))
                out[q] = ([v if finite(v) else None for v in values], entry.get("d") or {})
    missing = ["'%s vs %s'" % (q, reference(q)) for q in RECIPES if q not in out]
    if missing:
        fail("%s: no secondary %s" % (path, ", ".join(missing)))
    return seeds, depths, out


def mean(v):
    v = [x for x in v if x is not None]
    return sum(v) / len(v) if v else None


def ratio(num, den):
    return num / den if num is not None and den is not None and den != 0 else None


def interval(v, lib):
    """(mean, sd, lo, hi, n) of the finite values, two-sided 95% t interval."""
    v = [x for x in v if x is not None]
    n = len(v)
    if n < 2:
        return None, None, None, None, n
    m = sum(v) / n
    sd = math.sqrt(sum((x - m) ** 2 for x in v) / (n - 1))
    half = lib.ufp4_t_quantile(0.975, n - 1) * sd / math.sqrt(n)
    return m, sd, m - half, m + half, n


def fmt(x, spec="%.4f"):
    return "-" if x is None else spec % x


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default="reports/schedule")
    ap.add_argument("--out")
    args = ap.parse_args()
    paths = {k: os.path.join(args.dir, *p) for k, p in (("primary", ("analysis", "analysis.json")),
                                                         ("gaps", ("gaps", "analysis.json")),
                                                         ("fixed", ("eval-q", "analysis", "analysis.json")))}
    refs = {"primary": lambda q: SCHEDULED % q, "gaps": lambda q: "bf16", "fixed": lambda q: SCHEDULED % q}
    loaded = {k: load(paths[k], refs[k]) for k in ("primary", "gaps", "fixed")}
    seeds, depths, primary = loaded["primary"]
    for key in ("gaps", "fixed"):
        s, d, _ = loaded[key]
        if s != seeds or d != depths:
            fail("%s: seeds %s at depth %s, but %s has seeds %s at depth %s" % (paths[key], s, d, paths["primary"],
                                                                                seeds, depths))
    gaps, fixed = loaded["gaps"][2], loaded["fixed"][2]
    lib = library("schedule_recovery")

    result = {"dir": args.dir, "files": paths, "seeds": seeds, "depth": depths[0], "units": "pp of L_bf16 (per seed)",
              "recipes": {}}
    print("Final BF16 phase at L = %d, seeds %d-%d (n = %d); values in pp of each seed's L_bf16\n" % (
        depths[0], seeds[0], seeds[-1], len(seeds)))
    print("| recipe | gap (Holm) | recovery | R | R_s range | recovery under q | R' | precision effect, 95% CI |")
    print("|---|---|---:|---:|---|---:|---:|---|")
    for q in RECIPES:
        gap, gap_test = gaps[q]
        rec, rec_fix = primary[q][0], fixed[q][0]
        significant = gap_test.get("holm_rejected") is True
        r_s = [ratio(a, b) for a, b in zip(rec, gap)]
        rp_s = [ratio(a, b) for a, b in zip(rec_fix, gap)]
        prec = [b - a if a is not None and b is not None else None for a, b in zip(rec, rec_fix)]
        pm, psd, plo, phi, pn = interval(prec, lib)
        R = ratio(mean(rec), mean(gap)) if significant else None
        Rp = ratio(mean(rec_fix), mean(gap)) if significant else None
        result["recipes"][q] = {
            "gap_significant": significant, "gap_mean": mean(gap), "gap_p": gap_test.get("p"),
            "gap_holm_level": gap_test.get("holm_level"), "recovery_mean": mean(rec),
            "recovery_under_q_mean": mean(rec_fix), "R": R, "R_prime": Rp,
            "R_per_seed": r_s if significant else None, "R_prime_per_seed": rp_s if significant else None,
            "precision_effect": {"mean": pm, "sd": psd, "ci_lo": plo, "ci_hi": phi, "n": pn, "per_seed": prec},
            "per_seed": {"gap": gap, "recovery": rec, "recovery_under_q": rec_fix}}
        shown = [x for x in r_s if x is not None]
        print("| %s | %s pp, p %s (%s) | %s | %s | %s | %s | %s | %s [%s, %s] |" % (
            q, fmt(mean(gap)), fmt(gap_test.get("p"), "%.3g"), "significant" if significant else "not significant",
            fmt(mean(rec)), fmt(R, "%.2f") if significant else "not reported",
            "%.2f to %.2f" % (min(shown), max(shown)) if significant and shown else "-", fmt(mean(rec_fix)),
            fmt(Rp, "%.2f") if significant else "not reported", fmt(pm), fmt(plo), fmt(phi)))
    print("\nR = mean recovery / mean gap (registered: the ratio of the two means), given only where the gap's "
          "test is significant after Holm. Precision effect = L_q->bf16 evaluated in bf16 minus evaluated under q; "
          "recovery = recovery under q - precision effect.")
    out = args.out or os.path.join(args.dir, "recovery.json")
    try:
        with open(out + ".tmp", "w") as f:
            json.dump(result, f, indent=1)
            f.write("\n")
        os.replace(out + ".tmp", out)
    except OSError as e:
        fail("%s: cannot be written (%s)" % (out, e))
    print("wrote %s" % out)


if __name__ == "__main__":
    main()
