"""The aten::/prim:: converter table, by family. Each entry turns one TorchScript node into Cuvil nodes.

Converters get (ctx, inputs) with inputs already converted (cuvil Values or Python constants) and return the
output (a tuple for several outputs). Scalars computed at run time (aten::size, int arithmetic) are 0-d tensors.
"""
from __future__ import annotations

import numpy as np

from .torchscript import ConvertContext, converter, _onnx_dtype_id, SCALAR_TYPE_TO_TORCH, TORCH_TO_CUVIL

# Importing the family modules registers their converters.
from . import aten_core  # noqa: F401,E402
from . import aten_nn, aten_shape  # noqa: F401,E402
from . import aten_transformer  # noqa: F401,E402
from . import aten_export  # noqa: F401,E402
from . import aten_math, aten_order  # noqa: F401,E402
