#!/usr/bin/env python3
"""ufp4/power.h against scipy.stats (Debian python3-scipy; its t and noncentral t come from the
Boost math library, an implementation independent of ours), over random cases drawn from a fixed
seed. Usage: test_power_scipy.py PATH/power_eval (tests/power_eval.c).

Tolerances, each the stated accuracy of ufp4/power.h plus the reference's own error:
  t quantile   relative 1e-12; where SciPy's t.ppf misses (it does by up to ~1e-8 in far tails
               at small df), the case passes when SciPy's own t.cdf at our quantile gives back p
               to relative 1e-11, i.e. ours is the better inverse of the reference CDF
  t CDF        absolute 1e-14 and relative 1e-11 (ufp4_t_cdf of ufp4/stats.h, used inside)
  nct CDF      absolute 1e-12 for |ncp| <= 20, 3e-12 up to |ncp| = 40
  power        absolute 1e-11 (two nct terms at SciPy's critical value, see ref_crit)
  sample size  equal, except where the power at the boundary n is within 1e-9 of the target
  MDD          relative 1e-8 (its power equals the target to 1e-10)
Exit 77 (skip) when SciPy is missing, but 1 when CI is set: CI installs it (scripts/setup.sh)."""
import math
import random
import subprocess
import sys
import warnings

from system_python import import_or_skip

import_or_skip("scipy", "python3-scipy")
from scipy import optimize, stats  # noqa: E402

warnings.simplefilter("ignore")  # SciPy warns on the cases where Boost gives up (skipped below)
rng = random.Random(20240607)


def log_uniform(lo, hi):
    return math.exp(rng.uniform(math.log(lo), math.log(hi)))


def draw_df():
    return float(rng.randint(1, 40)) if rng.random() < 0.3 else log_uniform(1, 1000)


def close(want, tol):
    """A check that passes when the result is within tol of SciPy's."""
    return lambda got: None if abs(got - want) <= tol else f"got {got!r} scipy {want!r}"


def ref_crit(alpha, df):
    """t_{1-alpha/2, df}: SciPy's t.isf, polished by Newton steps on SciPy's own t.sf, because
    t.isf alone is off by up to ~1e-9 relative, which moves a power by as much."""
    crit = stats.t.isf(alpha / 2, df)
    for _ in range(3):
        crit += (stats.t.sf(crit, df) - alpha / 2) / stats.t.pdf(crit, df)
    return crit


def ref_power(df, ncp, alpha):
    crit = ref_crit(alpha, df)
    return stats.nct.sf(crit, df, ncp) + stats.nct.cdf(-crit, df, ncp)


def ref_paired_n(effect, sd, alpha, power):
    """The smallest n >= 2 with power >= target, searched from the normal approximation."""
    def enough(n):
        return ref_power(n - 1, math.sqrt(n) * effect / sd, alpha) >= power
    z = stats.norm.isf(alpha / 2) + stats.norm.isf(1 - power)
    n = max(2, math.ceil((z * sd / effect) ** 2))
    while not enough(n):
        n += 1
    while n > 2 and enough(n - 1):
        n -= 1
    return n


def cases():
    """(line for power_eval, what, check(got) -> error message or None)"""
    out = []
    for _ in range(1500):
        df = draw_df()
        p = log_uniform(1e-12, 0.5)
        p = 1 - p if rng.random() < 0.5 else p
        want = stats.t.ppf(p, df)

        def check(got, p=p, df=df, want=want):
            if abs(got - want) <= 1e-12 * abs(want):
                return None
            tail = stats.t.cdf(got, df) if got < 0 else stats.t.sf(got, df)
            q = p if p < 0.5 else 1 - p
            if abs(tail - q) <= 1e-11 * q:
                return None
            return f"got {got!r} scipy {want!r}; scipy's tail at ours {tail!r} against {q!r}"
        out.append((f"tq {p!r} {df!r}", f"t.ppf({p!r}, {df!r})", check))
    for _ in range(1500):
        df, t = draw_df(), rng.uniform(-40, 40) if rng.random() < 0.5 else rng.gauss(0, 3)
        want = stats.t.cdf(t, df)
        out.append((f"tcdf {t!r} {df!r}", f"t.cdf({t!r}, {df!r})",
                    close(want, max(1e-14, 1e-11 * want))))
    for _ in range(4000):
        df = draw_df()
        ncp = rng.uniform(-40, 40) if rng.random() < 0.3 else rng.uniform(-8, 8)
        t = rng.uniform(-50, 50) if rng.random() < 0.3 else ncp + rng.gauss(0, 3)
        want = stats.nct.cdf(t, df, ncp)
        if not math.isfinite(want):
            continue  # Boost gave up; nothing to compare with
        tol = 1e-12 if abs(ncp) <= 20 else 3e-12
        out.append((f"nct {t!r} {df!r} {ncp!r}", f"nct.cdf({t!r}, {df!r}, {ncp!r})",
                    close(want, tol)))
    for _ in range(600):
        df, ncp = draw_df(), rng.uniform(-8, 8)
        alpha = rng.choice([0.001, 0.01, 0.05, 0.1, 0.2])
        want = ref_power(df, ncp, alpha)
        out.append((f"power {df!r} {ncp!r} {alpha!r}",
                    f"power(df {df!r}, ncp {ncp!r}, alpha {alpha})", close(want, 1e-11)))
    for _ in range(150):
        effect, sd = rng.uniform(0.15, 2) * rng.choice([-1, 1]), 1.0
        alpha, power = rng.choice([0.01, 0.05, 0.1]), rng.choice([0.5, 0.8, 0.9, 0.95])
        want = ref_paired_n(effect, sd, alpha, power)

        def check_n(got, e=effect, a=alpha, pw=power, w=want):
            if got == w:
                return None
            if got < 2:
                return f"failed (power_eval printed {got}); scipy {w}"
            edge = min(got, w)
            if abs(ref_power(edge - 1, math.sqrt(edge) * e, a) - pw) <= 1e-9:
                return None
            return f"got {got} scipy {w}"
        out.append((f"n {effect!r} {sd!r} {alpha!r} {power!r}",
                    f"paired n(effect {effect!r}, alpha {alpha}, power {power})", check_n))
    for _ in range(150):
        n, sd = rng.randint(2, 60), log_uniform(1e-3, 10)
        alpha, power = rng.choice([0.01, 0.05, 0.1]), rng.choice([0.5, 0.8, 0.9])
        ncp = optimize.brentq(lambda c: ref_power(n - 1, c, alpha) - power, 0, 100, xtol=1e-14)
        want = ncp * sd / math.sqrt(n)
        what = f"mdd(sd {sd!r}, n {n}, alpha {alpha}, power {power})"
        out.append((f"mdd {sd!r} {n} {alpha!r} {power!r}", what, close(want, 1e-8 * want)))
    return out


def main():
    if len(sys.argv) != 2:
        print("usage: test_power_scipy.py PATH/power_eval")
        return 2
    todo = cases()
    r = subprocess.run([sys.argv[1]], input="".join(line + "\n" for line, _, _ in todo),
                       capture_output=True, text=True)
    got = r.stdout.split()
    if r.returncode != 0 or len(got) != len(todo):
        print(f"power_eval failed (exit {r.returncode}, {len(got)} of {len(todo)} results): "
              f"{r.stderr}")
        return 1
    failures = 0
    for (_, what, check), value in zip(todo, got):
        msg = check(float(value))
        if msg:
            failures += 1
            if failures <= 20:
                print(f"{what}: {msg}")
    print(f"{len(todo) - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
