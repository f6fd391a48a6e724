"""ufp4 from Python: the C library's bit-exact 4-bit quantizers on numpy arrays (ufp4.quantize,
encode, decode, measures, rht, grid) and, in ufp4.torch, a quantized nn.Linear for PyTorch.
Pure Python over libufp4 through ctypes (see _lib.py for where the library is looked for);
docs/API.md has the worked examples."""
from ._lib import UFP4Error, library_path
from .core import (GRIDS, MEASURES, ROUNDS, SCALES, Encoded, decode, encode, format_info, format_spec, grid,
                   measures, quantize, recipe_canonical, rht, rht_signs)

__all__ = ["UFP4Error", "library_path", "GRIDS", "MEASURES", "ROUNDS", "SCALES", "Encoded", "decode", "encode",
           "format_info", "format_spec", "grid", "measures", "quantize", "recipe_canonical", "rht", "rht_signs"]
