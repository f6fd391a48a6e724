#!/usr/bin/env python3
"""The install tree works for programs outside the source tree (docs/API.md, "C").

    test_install.py BUILD_DIR SOURCE_DIR CMAKE

Installs the build into a temporary prefix (cmake --install BUILD_DIR --prefix TMP), checks the
layout (SONAME, static library, headers, ufp4.pc, CMake package, binary, --help texts), copies
examples/ to a folder outside the source tree and builds both examples three ways: with
pkg-config, with pkg-config --static against libufp4.a, and as a CMake project with
find_package(ufp4). Then runs them and checks what they print:
  - quantize_tensor on a .npy file of random values: alpha, NMSE and SQNR against the same measures
    computed here with numpy from a direct transcription of the E2M1 / FP32-scale / 1x16 / RNE rule
    (s = amax/6 in float32, t = x/s, nearest grid value, ties to the even code);
  - train_steps: three finite losses, the first within 0.05 of ln 64 (tiny initial weights give a
    near-uniform prediction) and the loss after the steps below the first.
Every build must print the same bytes. Exit 1 on any failure."""
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np

E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def run(cmd, env=None, cwd=None):
    p = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    return p.stdout


def e2m1_reference(x):
    """Fake-quantized x (float32 [rows, cols], cols a multiple of 16) under E2M1, FP32 scale, 1x16, RNE."""
    b = x.reshape(-1, 16)
    amax = np.abs(b).max(axis=1, keepdims=True)
    s = (amax / np.float32(6)).astype(np.float32)
    t = np.abs(b) / np.where(s == 0, np.float32(1), s)
    d = np.abs(t[..., None] - E2M1)  # distance to each level
    best = d.min(axis=-1, keepdims=True)
    ties = d == best
    # the lowest level at the minimum distance, or on a tie the one with the even code
    idx = np.argmax(ties, axis=-1)
    two = ties.sum(axis=-1) > 1
    idx = np.where(two & (idx % 2 == 1), idx + 1, idx)
    q = (np.sign(b) * E2M1[idx]).astype(np.float32) * s
    return q.reshape(x.shape)


def measures(out):
    return {k: float(v) for k, v in re.findall(r"^(alpha|nmse|sqnr_db) (\S+)$", out, re.M)}


def check_layout(prefix, soversion, commands_seen):
    lib = os.path.join(prefix, "lib")
    need = ["lib/libufp4.so", "lib/libufp4.a", "include/ufp4/ufp4.h", "include/ufp4/version.h",
            "include/ufp4/export.h", "lib/pkgconfig/ufp4.pc", "lib/cmake/ufp4/ufp4Config.cmake",
            "lib/cmake/ufp4/ufp4ConfigVersion.cmake", "lib/cmake/ufp4/ufp4Targets.cmake", "bin/ufp4",
            "share/doc/ufp4/ufp4.txt"]
    missing = [p for p in need if not os.path.exists(os.path.join(prefix, p))]
    if missing:
        raise RuntimeError(f"install tree lacks {missing}")
    dyn = run(["readelf", "-d", os.path.join(lib, "libufp4.so")])
    soname = re.search(r"Library soname: \[([^\]]+)\]", dyn)
    if not soname or soname.group(1) != f"libufp4.so.{soversion}":
        raise RuntimeError(f"libufp4.so: SONAME {soname.group(1) if soname else None}, expected libufp4.so.{soversion}")
    if not os.path.islink(os.path.join(lib, "libufp4.so")):
        raise RuntimeError("lib/libufp4.so is not the development symlink")
    listing = open(os.path.join(prefix, "share/doc/ufp4/ufp4.txt")).read()
    commands = [c for c in re.findall(r"^  ([a-z][a-z0-9-]*) ", listing, re.M) if c not in ("help", "version")]
    for c in commands:
        text = open(os.path.join(prefix, f"share/doc/ufp4/ufp4-{c}.txt")).read()
        if "usage" not in text.lower():
            raise RuntimeError(f"share/doc/ufp4/ufp4-{c}.txt holds no usage line")
    commands_seen.extend(commands)


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    build, source, cmake = sys.argv[1:]
    tmp = tempfile.mkdtemp(prefix="ufp4-install-")
    try:
        prefix = os.path.join(tmp, "prefix")
        run([cmake, "--install", build, "--prefix", prefix])
        version = re.search(r"ufp4 (\d+)\.(\d+)\.(\d+)", run([os.path.join(prefix, "bin/ufp4"), "version"]))
        major, minor = version.group(1), version.group(2)
        commands = []
        check_layout(prefix, f"{major}.{minor}" if major == "0" else major, commands)

        src = os.path.join(tmp, "examples")  # outside the source tree
        shutil.copytree(os.path.join(source, "examples"), src)
        env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(prefix, "lib/pkgconfig"))
        pc = ["pkg-config"]
        if run(pc + ["--modversion", "ufp4"], env=env).strip() != version.group(0)[5:]:
            raise RuntimeError("pkg-config --modversion ufp4 differs from `ufp4 version`")
        cflags = run(pc + ["--cflags", "ufp4"], env=env).split()
        libs = run(pc + ["--libs", "ufp4"], env=env).split()
        static_libs = [f for f in run(pc + ["--static", "--libs", "ufp4"], env=env).split()
                       if f != "-lufp4" and not f.startswith("-L")]
        rpath = "-Wl,-rpath," + os.path.join(prefix, "lib")
        builds = {}
        for ex in ("quantize_tensor", "train_steps"):
            c = os.path.join(src, ex + ".c")
            exe = os.path.join(tmp, "pc-" + ex)
            run(["cc", "-std=c11", "-O2", c, "-o", exe] + cflags + libs + ["-lm", rpath])
            builds.setdefault(ex, []).append(exe)
            exe = os.path.join(tmp, "static-" + ex)
            run(["cc", "-std=c11", "-O2", c, "-o", exe] + cflags + [os.path.join(prefix, "lib/libufp4.a")]
                + static_libs + ["-lm"])
            if "libufp4" in run(["readelf", "-d", exe]):
                raise RuntimeError(f"{exe}: linked against libufp4.a, yet it needs libufp4.so")
            builds[ex].append(exe)
        cbuild = os.path.join(tmp, "cmake-build")
        run([cmake, "-S", src, "-B", cbuild, "-DCMAKE_BUILD_TYPE=Release", "-DCMAKE_PREFIX_PATH=" + prefix])
        run([cmake, "--build", cbuild])
        for ex in builds:
            builds[ex].append(os.path.join(cbuild, ex))

        rng = np.random.default_rng(15)
        x = (rng.standard_normal((64, 512)) * np.exp(rng.standard_normal((64, 1)))).astype(np.float32)
        npy = os.path.join(tmp, "x.npy")
        np.save(npy, x)
        outs = {ex: [run([exe] + (["e2m1", "fp32", "16", npy] if ex == "quantize_tensor" else ["ufp4"]))
                     for exe in exes] for ex, exes in builds.items()}
        for ex, o in outs.items():
            if any(v != o[0] for v in o):
                raise RuntimeError(f"{ex}: the pkg-config, static and CMake builds print different output:\n" +
                                   "\n---\n".join(o))

        got = measures(outs["quantize_tensor"][0])
        xd, qd = x.astype(np.float64), e2m1_reference(x).astype(np.float64)
        nmse = float(((qd - xd) ** 2).sum() / (xd ** 2).sum())
        want = {"alpha": float((qd * xd).sum() / (xd ** 2).sum()), "nmse": nmse, "sqnr_db": -10 * math.log10(nmse)}
        for k, v in want.items():
            if k not in got or abs(got[k] - v) > 1e-6 * max(1.0, abs(v)):
                raise RuntimeError(f"quantize_tensor: {k} {got.get(k)}, numpy reference {v}\n{outs['quantize_tensor'][0]}")

        out = outs["train_steps"][0]
        losses = [float(v) for v in re.findall(r"^step \d loss (\S+)$", out, re.M)]
        after = re.search(r"^after 3 steps loss (\S+)", out, re.M)
        if len(losses) != 3 or not after or not all(math.isfinite(v) for v in losses):
            raise RuntimeError(f"train_steps: expected three finite losses:\n{out}")
        if abs(losses[0] - math.log(64)) > 0.05 or not float(after.group(1)) < losses[0]:
            raise RuntimeError(f"train_steps: first loss not near ln 64 = {math.log(64):.4f}, or no decrease:\n{out}")
        print(f"install tree: {prefix} ({len(commands)} help texts); 3 builds of each example agree")
        print(f"quantize_tensor: sqnr_db {got['sqnr_db']:.6f} (numpy {want['sqnr_db']:.6f}), alpha {got['alpha']:.9f}")
        print(f"train_steps (ufp4): losses {losses}, after {after.group(1)}")
        return 0
    except (RuntimeError, OSError, AttributeError) as e:
        print(f"test_install: {e}")
        return 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
