#!/usr/bin/env python3
"""ufp4.torch against the C engine: Linear's output and both gradients equal, bit for bit, those of
tests/linear_eval.c (ufp4_linear_forward/backward called directly, with the context built the way
the model builds it) for every preset recipe and several seeds, steps and layers; gradcheck of the
fp32 recipe (the quantizer is the identity, so the layer is X W^T with a straight-through
backward) in float64; convert on nested modules changes exactly the named ones."""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from py_checks import check, expect, finish  # noqa: E402
from system_python import import_or_skip  # noqa: E402

np = import_or_skip("numpy", "python3-numpy")
torch = import_or_skip("torch", "python3-torch")
import ufp4  # noqa: E402
import ufp4.torch as ut  # noqa: E402
from torch import nn  # noqa: E402

EVAL = os.environ["UFP4_LINEAR_EVAL"]
TMP = tempfile.mkdtemp(prefix="ufp4_pyt_")


def same(a, b):
    a = np.ascontiguousarray(a.detach().numpy() if torch.is_tensor(a) else a, np.float32)
    b = np.ascontiguousarray(b, np.float32)
    return a.shape == b.shape and np.array_equal(a.view(np.uint32), b.view(np.uint32))


def c_engine(recipe, seed, step, layer, proj, x, w, dy):
    paths = [os.path.join(TMP, f + ".npy") for f in ("x", "w", "dy", "y", "dx", "dw")]
    for p, a in zip(paths, (x, w, dy)):
        np.save(p, a)
    subprocess.run([EVAL, recipe, str(seed), str(step), str(layer), str(proj)] + paths, check=True)
    return [np.load(p) for p in paths[3:]]


def test_linear_equals_c():
    rng = np.random.default_rng(5)
    n, fin, fout = 64, 128, 64
    x = rng.standard_normal((n, fin)).astype(np.float32)
    w = (rng.standard_normal((fout, fin)) * 0.1).astype(np.float32)
    dy = rng.standard_normal((n, fout)).astype(np.float32)
    cases = [(r, 0, 0, 0, 0) for r in ("fp32", "bf16", "e2m1", "ufp4", "nvfp4", "mxfp4")]
    cases += [("ufp4", 7, 3, 2, 5), ("nvfp4", 123456789, 1000, 11, 6), ("ufp4,rht=none,sr=all", 1, 2, 3, 4),
              ("e2m1,block=32,scale=e8m0-rceil,rht=all,rht_n=64", 9, 0, 1, 0), ("ufp4,grid=int4,sr=dy,sr_bits=8", 5, 5, 5, 1)]
    for recipe, seed, step, layer, proj in cases:
        want_y, want_dx, want_dw = c_engine(recipe, seed, step, layer, proj, x, w, dy)
        lin = ut.Linear(fin, fout, recipe=recipe)
        with torch.no_grad():
            lin.weight.copy_(torch.from_numpy(w))
        lin.seed, lin.step, lin.layer, lin.proj = seed, step, layer, proj
        xt = torch.from_numpy(x.copy()).requires_grad_(True)
        y = lin(xt)
        y.backward(torch.from_numpy(dy))
        tag = f"{recipe} seed {seed} step {step} layer {layer} proj {proj}"
        check(same(y, want_y), f"Linear forward equals the C engine ({tag})")
        check(same(xt.grad, want_dx), f"Linear dX equals the C engine ({tag})")
        check(same(lin.weight.grad, want_dw), f"Linear dW equals the C engine ({tag})")
        # the same rows as a [batch, seq, in] tensor give the same bits
        x3 = torch.from_numpy(x.copy()).reshape(4, n // 4, fin).requires_grad_(True)
        y3 = lin(x3)
        y3.backward(torch.from_numpy(dy).reshape(4, n // 4, fout))
        check(same(y3.reshape(n, fout), want_y) and same(x3.grad.reshape(n, fin), want_dx), f"3-D input ({tag})")
    # the stream fields reach the library: SR on dY draws other bits at another step or layer
    lin = ut.Linear(fin, fout, recipe="ufp4")
    xt = torch.from_numpy(x)
    grads = []
    for step, layer in ((0, 0), (1, 0), (0, 1), (0, 0)):
        lin.weight.grad = None
        lin.step, lin.layer = step, layer
        lin(xt).backward(torch.from_numpy(dy))
        grads.append(lin.weight.grad.clone())
    check(not torch.equal(grads[0], grads[1]) and not torch.equal(grads[0], grads[2]), "step and layer change SR bits")
    check(torch.equal(grads[0], grads[3]), "the same fields give the same bits")


def test_gradcheck_fp32():
    torch.manual_seed(0)

    # The library computes in float32; gradcheck perturbs float64 inputs by eps = 1e-2, far above
    # float32's rounding of the inputs, so a linear map's finite differences are exact to ~1e-5.
    def f(x64, w64, b64):
        return ut.linear(x64.float(), w64.float(), b64.float(), recipe="fp32").double()

    x = torch.randn(6, 8, dtype=torch.float64, requires_grad=True)
    w = torch.randn(5, 8, dtype=torch.float64, requires_grad=True)
    b = torch.randn(5, dtype=torch.float64, requires_grad=True)
    try:
        ok = torch.autograd.gradcheck(f, (x, w, b), eps=1e-2, atol=1e-3, rtol=1e-3)
    except RuntimeError as e:
        print(e)
        ok = False
    check(ok, "gradcheck of the fp32 recipe (identity quantizer, straight-through backward)")
    # and it fails for a wrong backward: a layer that drops dW's second half
    lin2 = ut.Linear(8, 5, recipe="fp32")
    lin2.register_full_backward_hook(lambda m, gi, go: (gi[0] * 0.5,))
    try:
        bad = torch.autograd.gradcheck(lambda x64: lin2(x64.float()).double(), (x,), eps=1e-2, atol=1e-3, rtol=1e-3,
                                       raise_exception=False)
    except RuntimeError:
        bad = False
    check(not bad, "gradcheck catches a wrong input gradient")


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.ModuleDict({"q": nn.Linear(16, 16, bias=False), "o": nn.Linear(16, 16)})
        self.mlp = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 16))
        self.norm = nn.LayerNorm(16)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block(), Block()])
        self.lm_head = nn.Linear(16, 10, bias=False)


def test_convert():
    torch.manual_seed(1)
    m = Model()
    before = {n: mod for n, mod in m.named_modules()}
    params = {n: p for n, p in m.named_parameters()}
    x = torch.randn(4, 16)

    def run(model):
        h = x
        for b in model.blocks:
            h = b.norm(h + b.attn["o"](b.attn["q"](h)) + b.mlp(h))
        return model.lm_head(h)

    ref = run(m)
    changed = ut.convert(m, recipe="fp32", exclude=["lm_head", "blocks.1.mlp"])
    want = ["blocks.0.attn.q", "blocks.0.attn.o", "blocks.0.mlp.0", "blocks.0.mlp.2", "blocks.1.attn.q",
            "blocks.1.attn.o"]
    check(changed == want, f"convert changed {changed}, expected {want}")
    for n, mod in m.named_modules():
        if n in want:
            check(isinstance(mod, ut.Linear) and mod.recipe == "fp32", f"{n} is a ufp4.torch.Linear")
        else:
            check(mod is before[n], f"{n} is left alone")
    check(all(p is params[n] for n, p in m.named_parameters()) and len(params) == len(list(m.parameters())),
          "converted layers share the original Parameters")
    check([m.get_submodule(n).layer for n in want] == list(range(len(want))), "layers numbered in module order")
    check(torch.allclose(run(m), ref, atol=1e-5), "fp32 recipe computes what nn.Linear does")
    check(ut.convert(m, recipe="ufp4") == ["blocks.1.mlp.0", "blocks.1.mlp.2", "lm_head"], "a second convert adds the rest")
    layers = sorted(mod.layer for mod in m.modules() if isinstance(mod, ut.Linear))
    check(layers == list(range(len(want) + 3)), f"a second convert numbers after the first: {layers}")
    lin = nn.Linear(16, 16)
    tied = nn.Sequential(lin, nn.ReLU(), lin)
    check(ut.convert(tied) == ["0"] and tied[0] is tied[2] and isinstance(tied[2], ut.Linear),
          "a module under two names becomes one ufp4 layer under both")
    expect(TypeError, lambda: ut.convert(nn.Linear(4, 4)), "convert of a bare nn.Linear", "ufp4.torch.Linear")
    ut.set_step(m, 17)
    check(all(mod.step == 17 for mod in m.modules() if isinstance(mod, ut.Linear)), "set_step reaches every layer")
    m2 = Model()
    try:
        ut.convert(m2, recipe="ufp4,rht=sideways")
        check(False, "a bad recipe raises")
    except ufp4.UFP4Error as e:
        check("sideways" in str(e), f"the recipe error carries the parser's message: {e}")
    check(not any(isinstance(mod, ut.Linear) for mod in m2.modules()), "a failed convert changes nothing")


def test_bad_arguments():
    lin = ut.Linear(8, 4)
    expect(TypeError, lambda: lin(torch.randn(2, 8, dtype=torch.float64)), "float64 input", "float32")
    expect(ValueError, lambda: lin(torch.randn(2, 7)), "wrong features", "features")
    expect(ufp4.UFP4Error, lambda: ut.Linear(8, 4, recipe="nope"), "unknown recipe", "nope")
    expect(TypeError, lambda: ut.convert(Model(), exclude="lm_head"), "exclude as a str", "list")
    expect(TypeError, lambda: ut.Linear(8, 4, device="meta"), "a device other than cpu", "CPU")
    lin = ut.Linear(16, 16)
    lin.layer = 5000  # over the stream's 12-bit layer field: refused by the C check
    expect(ufp4.UFP4Error, lambda: lin(torch.randn(16, 16)), "layer over the stream field", "layer")


def test_autograd_edges():
    """What autograd users run into: a double backward is refused (the C backward is not itself
    differentiable, and its gradients would otherwise silently lack that term); a frozen weight
    skips Wgrad, so the input gradient is the same bits and an RHT along the tokens need not fit;
    an RHT that the backward needs and that does not fit is refused in the forward, by GEMM and
    axis; stream fields are integers below 2^64."""
    torch.manual_seed(2)
    x, w = torch.randn(16, 64, requires_grad=True), torch.randn(32, 64, requires_grad=True)
    gx, = torch.autograd.grad((ut.linear(x, w, recipe="fp32") ** 2).sum(), x, create_graph=True)
    expect(RuntimeError, lambda: (gx ** 2).sum().backward(), "a double backward", "once_differentiable")
    xa, wa = torch.randn(16, 64, requires_grad=True), torch.randn(32, 64, requires_grad=True)
    xb = xa.detach().clone().requires_grad_()
    ut.linear(xa, wa, recipe="nvfp4", seed=3).sum().backward()
    ut.linear(xb, wa.detach(), recipe="nvfp4", seed=3).sum().backward()
    check(torch.equal(xa.grad, xb.grad), "dX is the same bits with the weight frozen")
    x5 = torch.randn(5, 64, requires_grad=True)
    ut.linear(x5, torch.randn(32, 64), recipe="nvfp4").sum().backward()
    check(x5.grad is not None and x5.grad.shape == (5, 64), "a frozen weight needs no Wgrad RHT over 5 tokens")
    expect(ufp4.UFP4Error, lambda: ut.linear(torch.randn(20, 64, requires_grad=True), w, recipe="nvfp4"),
           "Wgrad's RHT over 20 tokens, in the forward", "its Wgrad RHT of 16 rotates along the tokens (the rows of X), 20")
    expect(ufp4.UFP4Error, lambda: ut.linear(torch.randn(16, 24), torch.randn(32, 24), recipe="ufp4"),
           "Fprop's RHT over 24 inputs", "its Fprop RHT of 16 rotates along its inputs, 24")
    with torch.no_grad():
        check(ut.linear(torch.randn(20, 64), w, recipe="nvfp4").shape == (20, 32), "without gradients 20 tokens run")
    expect(ValueError, lambda: ut.linear(torch.randn(2, 64), w, seed=1 << 64), "seed 2^64", "outside [0, 2^64)")
    expect(TypeError, lambda: ut.linear(torch.randn(2, 64), w, seed=1.7), "seed 1.7", "integer")
    expect(TypeError, lambda: ut.set_step(nn.Sequential(ut.Linear(4, 4)), 2.5), "step 2.5", "integer")
    stepped = nn.Sequential(ut.Linear(4, 4))
    ut.set_step(stepped, torch.tensor(3))
    check(stepped[0].step == 3 and type(stepped[0].step) is int, "a 0-d integer tensor is a step")
    expect(ValueError, lambda: ut.linear(torch.randn(2, 64), w, layer=1 << 32), "layer 2^32", "layer = 4294967296")
    check(ut.convert(ut.Linear(4, 4)) == [], "convert of a ufp4 Linear changes nothing")
    expect(ValueError, lambda: ut.linear(torch.tensor(1.0), w), "a 0-d input", "0-d")
    expect(ValueError, lambda: ut.linear(torch.randn(2, 64), torch.randn(2, 32, 64)), "a 3-d weight", "out_features")


finish("python_torch", test_linear_equals_c, test_gradcheck_fp32, test_convert, test_bad_arguments, test_autograd_edges)
