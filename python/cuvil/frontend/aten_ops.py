"""The aten::/prim:: converter table, by family. Each entry turns one TorchScript node into Cuvil nodes. The
registry itself, the context converters get and the dtype table are in context.py; the front ends import this
module to fill the registry.

Converters get (ctx, inputs) with inputs already converted (cuvil Values or Python constants) and return the
output (a tuple for several outputs). Scalars computed at run time (aten::size, int arithmetic) are 0-d tensors.
"""
from __future__ import annotations

# Importing the family modules registers their converters.
from . import aten_core  # noqa: F401,E402
from . import aten_nn, aten_shape  # noqa: F401,E402
from . import aten_transformer  # noqa: F401,E402
from . import aten_export  # noqa: F401,E402
