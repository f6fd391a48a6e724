"""ufp4 inside PyTorch: a drop-in nn.Linear whose three GEMMs run the C library's quantized linear
layer (include/ufp4/linear.h), and `convert`, which swaps the nn.Linear modules of a model.

    import ufp4.torch
    model = MyModel()
    changed = ufp4.torch.convert(model, recipe="ufp4", exclude=["lm_head"])
    for step in range(steps):
        ufp4.torch.set_step(model, step)          # new stochastic-rounding bits every step
        loss = model(x).loss; loss.backward(); opt.step()

Random bits. A recipe with stochastic rounding or random RHT signs draws them from the layer's
stream (include/ufp4/stream.h). Each ufp4.torch.Linear holds the stream's fields as attributes:
`seed` (the run seed: the Philox key and the seed of the random RHT signs), `step`, `micro`,
`micro_steps`, `rank`, `layer`, `expert` and `proj`, all 0 by default. `convert` numbers the
layers it makes 0, 1, 2, ... in module order (`layer`; after the model's existing ufp4 layers), so
no two share bits; `set_step(model,
step)` sets `step` on every one of them. For the same inputs, weight, recipe and fields the output
and both gradients are bit-identical to ufp4_linear_forward / ufp4_linear_backward in C.

Limits: CPU tensors of dtype float32 only (the library has no GPU path); the bias, when asked
for, is added by PyTorch in float32 outside the quantized GEMMs."""
import ctypes
import operator

import torch
from torch import nn
from torch.autograd.function import once_differentiable

from . import _lib
from .core import recipe_canonical

STREAM_FIELDS = ("seed", "step", "micro", "micro_steps", "rank", "layer", "expert", "proj")


def _ptr(t):
    return ctypes.c_void_p(t.data_ptr()) if t is not None else None


def _check(t, what):
    if t.device.type != "cpu":
        raise TypeError(f"ufp4.torch: {what} is on {t.device}; the library runs on CPU tensors only")
    if t.dtype != torch.float32:
        raise TypeError(f"ufp4.torch: {what} has dtype {t.dtype}; the library takes float32")


class _LinearFunction(torch.autograd.Function):
    """Y = X W^T by ufp4_linear_forward; dX and dW by ufp4_linear_backward (into zeroed buffers,
    so they are the C engine's gradients of this call alone)."""

    @staticmethod
    def forward(ctx, x, weight, recipe, stream, need_dx, need_dw):
        _check(x, "input")
        _check(weight, "weight")
        if weight.dim() != 2:
            raise ValueError(f"ufp4.torch: weight has shape {tuple(weight.shape)}; it must be [out_features, in_features]")
        if x.dim() == 0:
            raise ValueError("ufp4.torch: input is a 0-d tensor; it needs a last dimension of features")
        out_f, in_f = weight.shape
        if x.shape[-1] != in_f:
            raise ValueError(f"ufp4.torch: input has {x.shape[-1]} features, the layer takes {in_f}")
        x2 = x.reshape(-1, in_f).contiguous()
        w = weight.contiguous()
        # What the backward will need is known now: an RHT of Dgrad or Wgrad that does not fit
        # fails here, before any work, naming the GEMM and the axis, not later in loss.backward().
        _lib.call("capi_linear_check", recipe, x2.shape[0], in_f, out_f, need_dx, need_dw)
        y = torch.empty(x2.shape[0], out_f, dtype=torch.float32)
        _lib.call("capi_linear_forward", recipe, stream, _ptr(x2), _ptr(w), _ptr(y), x2.shape[0], in_f, out_f)
        ctx.save_for_backward(x2, w)
        ctx.recipe, ctx.stream, ctx.x_shape = recipe, stream, x.shape
        return y.reshape(*x.shape[:-1], out_f)

    @staticmethod
    @once_differentiable  # the C backward is not itself differentiable: a double backward raises
    def backward(ctx, grad_y):
        x2, w = ctx.saved_tensors
        out_f, in_f = w.shape
        dy = grad_y.reshape(-1, out_f).to(torch.float32).contiguous()
        dx = torch.zeros_like(x2) if ctx.needs_input_grad[0] else None
        dw = torch.zeros_like(w) if ctx.needs_input_grad[1] else None  # a frozen weight: no Wgrad
        _lib.call("capi_linear_backward", ctx.recipe, ctx.stream, _ptr(dy), _ptr(x2), _ptr(w), _ptr(dx), _ptr(dw),
                  x2.shape[0], in_f, out_f)
        return (dx.reshape(ctx.x_shape) if dx is not None else None), dw, None, None, None, None


def _field(f, v):
    """A stream field as the C library takes it: an integer (a Python or numpy int, or a 0-d
    integer tensor) in [0, 2^64) for seed and step, [0, 2^32) for the others (the library checks
    their finer limits, e.g. layer < 4096)."""
    if isinstance(v, bool):
        raise TypeError(f"ufp4.torch: stream field {f} must be an integer, got {v!r}")
    try:
        v = operator.index(v)
    except TypeError:
        raise TypeError(f"ufp4.torch: stream field {f} must be an integer, got {v!r}") from None
    bits = 64 if f in ("seed", "step") else 32
    if not 0 <= v < 1 << bits:
        raise ValueError(f"ufp4.torch: stream field {f} = {v} is outside [0, 2^{bits})")
    return v


def _stream(fields):
    vals = [_field(f, fields.get(f, 0)) for f in STREAM_FIELDS]
    return (ctypes.c_uint64 * len(vals))(*vals)


def linear(x, weight, bias=None, recipe="ufp4", **stream):
    """The functional form of Linear: x W^T (+ bias) under `recipe`, with the stream fields
    (STREAM_FIELDS: seed, step, micro, micro_steps, rank, layer, expert, proj; 0 when omitted)
    given as keywords."""
    unknown = set(stream) - set(STREAM_FIELDS)
    if unknown:
        raise TypeError(f"ufp4.torch.linear: unknown stream fields {sorted(unknown)} (known: {STREAM_FIELDS})")
    grad = torch.is_grad_enabled()  # off inside forward, so asked here
    y = _LinearFunction.apply(x, weight, _lib.cstr(recipe, "recipe"), _stream(stream),
                              int(grad and x.requires_grad), int(grad and weight.requires_grad))
    return y + bias if bias is not None else y


class Linear(nn.Linear):
    """nn.Linear under a ufp4 recipe: the same parameters, initialisation and state_dict keys as
    nn.Linear, with forward and backward run by the C library. `recipe` is a spec string as for
    `ufp4 train --recipe` ("ufp4", "nvfp4", "e2m1,rht=none", "fp32"), checked by the C parser
    when the module is made (a bad one raises UFP4Error with the parser's message)."""

    def __init__(self, in_features, out_features, bias=False, recipe="ufp4", device=None, dtype=None):
        if device is not None and torch.device(device).type != "cpu":
            raise TypeError("ufp4.torch.Linear: the library runs on CPU tensors only")
        if dtype is not None and dtype != torch.float32:
            raise TypeError("ufp4.torch.Linear: the library takes float32 parameters")
        super().__init__(in_features, out_features, bias=bias)
        self.recipe = recipe
        self.recipe_spec = recipe_canonical(recipe)
        for f in STREAM_FIELDS:
            setattr(self, f, 0)

    def forward(self, x):
        return linear(x, self.weight, self.bias, self.recipe, **{f: getattr(self, f) for f in STREAM_FIELDS})

    def extra_repr(self):
        return super().extra_repr() + f", recipe={self.recipe!r}"


def _excluded(fqn, exclude):
    # torchtitan's filter_fqns: a module is left alone when any filter string occurs in its name.
    return any(f in fqn for f in exclude)


def convert(model, recipe="ufp4", exclude=()):
    """Replaces every nn.Linear of the module tree (not already a ufp4.torch.Linear) whose fully
    qualified name contains none of the strings in `exclude` by a ufp4.torch.Linear that shares its
    weight and bias Parameters (so an optimizer made before keeps working). A module reached by
    several names (weight tying by module) is replaced by one new layer everywhere, and is left
    alone when any of its names is excluded. The new layers get `layer` numbers in module order,
    after those of the model's ufp4.torch.Linear layers (a second convert continues the count), so
    no two share bits. Returns the names changed (each module's first name), in that order."""
    if isinstance(exclude, str):
        raise TypeError("ufp4.torch.convert: exclude is a list of names, not a str")
    if isinstance(model, nn.Linear) and not isinstance(model, Linear):
        raise TypeError("ufp4.torch.convert replaces the nn.Linear modules inside a model; for a single "
                        "layer make a ufp4.torch.Linear (or wrap it in a module)")
    recipe_canonical(recipe)  # a bad recipe fails before anything is changed
    refs = [(name, m) for name, m in model.named_modules(remove_duplicate=False)
            if isinstance(m, nn.Linear) and not isinstance(m, Linear) and name]
    skip = {id(m) for name, m in refs if _excluded(name, exclude)}
    first = max((m.layer + 1 for m in model.modules() if isinstance(m, Linear)), default=0)
    made, changed = {}, []
    for name, m in refs:
        if id(m) in skip:
            continue
        if id(m) not in made:
            q = Linear(m.in_features, m.out_features, bias=m.bias is not None, recipe=recipe)
            q.weight = m.weight
            if m.bias is not None:
                q.bias = m.bias
            q.layer = first + len(made)
            made[id(m)] = q
            changed.append(name)
        parent_name, _, child = name.rpartition(".")
        setattr(model.get_submodule(parent_name) if parent_name else model, child, made[id(m)])
    return changed


def set_step(model, step):
    """Sets `step` on every ufp4.torch.Linear of the module tree (new stochastic-rounding bits)."""
    for m in model.modules():
        if isinstance(m, Linear):
            m.step = _field("step", step)
