#!/usr/bin/env python3
"""scripts/schedule_design.py: the registered choice of L and N for docs/RESULTS.md section 4, on
made-up final analyses. L is the deepest depth whose e2m1 row has p < 0.05 (a deeper row with
p = 0.05 exactly, or an invalid one, is passed over); N is checked against SciPy's noncentral t:
the smallest n >= 2 whose two-sided paired t test at alpha 0.05 has power >= 0.8 for half the gap
and the row's sd (and n - 1 does not reach it). The cap at 24 prints the MDD there; no significant
depth gives the deepest depth and the study's n. A missing file, a file that is not the study's
analysis, or a missing library gives exit 2 naming it.

    test_schedule_design.py LIBUFP4    (Debian's python3, for python3-scipy)"""
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from py_checks import check, finish  # noqa: E402
from system_python import import_or_skip  # noqa: E402

import_or_skip("scipy", "python3-scipy")
from scipy import stats  # noqa: E402

warnings.simplefilter("ignore")  # Boost warns at df = 1 but returns finite values (checked in power)

SRC = os.environ.get("UFP4_SOURCE_DIR", os.path.join(os.path.dirname(__file__), ".."))
SCRIPT = os.path.join(SRC, "scripts", "schedule_design.py")
LIB = sys.argv[1] if len(sys.argv) > 1 else os.path.join(SRC, "build", "libufp4.so")


def power(effect, sd, n, alpha=0.05):
    df, ncp = n - 1, (n ** 0.5) * effect / sd
    crit = stats.t.ppf(1 - alpha / 2, df)
    p = stats.nct.sf(crit, df, ncp) + stats.nct.cdf(-crit, df, ncp)
    if not math.isfinite(p):
        raise AssertionError("SciPy's power is %r at n %d" % (p, n))
    return p


def scipy_n(effect, sd):
    n = 2
    while power(effect, sd, n) < 0.8:
        n += 1
    return n


def analysis(rows, n_final=12):
    """rows: (depth, mean, sd, p, valid) of e2m1; a ufp4 series with other numbers beside it."""
    def series(recipe, rs):
        return {"recipe": recipe, "depths": [{"depth": d, "rel_err": {"valid": v, "n": n_final, "mean": m, "sd": s,
                                                                       "p": p}} for d, m, s, p, v in rs]}
    return {"power": {"n": n_final}, "series": [series("ufp4", [(d, 9.0, 0.1, 1e-9, True) for d, *_ in rows]),
                                                 series("e2m1", rows)]}


def run(obj, lib=LIB, raw=None):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "analysis.json")
        if raw is not None or obj is not None:
            with open(path, "w") as f:
                f.write(raw if raw is not None else json.dumps(obj))
        p = subprocess.run([sys.executable, SCRIPT, path], capture_output=True, text=True,
                           env=dict(os.environ, UFP4_LIBRARY=lib))
    return p.returncode, p.stdout, p.stderr, path


def command(out):
    m = re.search(r"^scripts/study_followup\.sh schedule (\d+) (\d+)$", out.splitlines()[-1] if out else "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def test_deepest_significant():
    # L=16 has p exactly 0.05 (not < 0.05), L=8 is invalid: L=4 is the deepest significant depth
    for mean, sd in ((1.2, 0.9), (0.5, 0.6), (2.0, 1.1), (0.8, 0.2)):
        rows = [(2, 0.3, 0.4, 0.01, True), (4, mean, sd, 0.001, True), (8, 3.0, 0.5, 1e-6, False),
                (16, 1.0, 1.0, 0.05, True)]
        rc, out, err, _ = run(analysis(rows))
        check(rc == 0, "exit %d: %s" % (rc, err))
        want_n = scipy_n(mean / 2, sd)
        check(power(mean / 2, sd, want_n) >= 0.8 and (want_n == 2 or power(mean / 2, sd, want_n - 1) < 0.8), "scipy's n")
        want = (4, min(want_n, 24))
        check(command(out) == want, "gap %g sd %g: %s, not %s (scipy n %d)\n%s" % (mean, sd, command(out), want,
                                                                                   want_n, out))
        check("L=4" in out and "L=16" in out, "the reasoning lists every depth: %s" % out)


def test_cap():
    rows = [(2, 0.2, 1.0, 0.04, True), (16, 0.1, 1.0, 0.2, True)]
    rc, out, err, _ = run(analysis(rows))
    check(rc == 0 and command(out) == (2, 24), "capped: %d %s %s" % (rc, out, err))
    check(scipy_n(0.1, 1.0) > 24, "the case does need more than 24 seeds")
    m = re.search(r"capped at 24 seeds: the MDD there is (\S+) pp", out)
    check(m is not None, "no MDD at the cap: %s" % out)
    if m:  # the MDD at 24 is the effect whose power is 0.8 there
        check(abs(power(float(m.group(1)), 1.0, 24) - 0.8) < 1e-6, "the MDD's power is %g" % power(float(m.group(1)), 1.0, 24))


def test_none_significant():
    rows = [(2, 0.2, 1.0, 0.3, True), (4, 0.2, 1.0, 0.06, True), (8, 0.2, 1.0, 0.5, True)]
    rc, out, err, _ = run(analysis(rows, n_final=18))
    check(rc == 0 and command(out) == (8, 18), "none significant: %d %s %s" % (rc, out, err))
    check("R is not reported" in out, "says R is not reported: %s" % out)


def test_bad_input():
    rc, out, err, path = run(None)
    check(rc == 2 and path in err, "missing file: %d %s" % (rc, err))
    rc, out, err, path = run(None, raw="{not json")
    check(rc == 2 and "cannot be read as JSON" in err and path in err, "not JSON: %d %s" % (rc, err))
    rc, out, err, path = run({"series": [{"recipe": "ufp4", "depths": []}]})
    check(rc == 2 and "no depth series of e2m1" in err, "no e2m1: %d %s" % (rc, err))
    rc, out, err, path = run(analysis([(2, 1.0, 1.0, 0.01, True)]), lib="/nonexistent/libufp4.so")
    check(rc == 2 and "/nonexistent/libufp4.so" in err, "no library: %d %s" % (rc, err))


if __name__ == "__main__":
    finish("test_schedule_design", test_deepest_significant, test_cap, test_none_significant, test_bad_input)
