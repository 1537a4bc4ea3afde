"""The `cuvil` console script of an installed wheel: runs the native CLI shipped inside the package.

In a development tree (PYTHONPATH=python) the CLI is the build's own, build/bin/cuvil."""
from __future__ import annotations

import os
import sys

_PACKAGE = os.path.dirname(os.path.abspath(__file__))


def executable() -> str:
    """The path of the native `cuvil` program: the wheel's, else the development build's."""
    for path in (os.path.join(_PACKAGE, "bin", "cuvil"),
                 os.path.join(os.path.dirname(os.path.dirname(_PACKAGE)), "build", "bin", "cuvil")):
        if os.access(path, os.X_OK):
            return path
    raise FileNotFoundError("the cuvil program is not installed beside the cuvil package (build it with "
                            "scripts/build.sh, or pip install the package)")


def main() -> None:
    try:
        exe = executable()
    except FileNotFoundError as e:
        sys.exit(f"error: {e}")
    os.environ.setdefault("CUVIL_PYTHON", sys.executable)  # `cuvil cache` runs in this Python (cuvil.cache_cli)
    os.execv(exe, [exe, *sys.argv[1:]])


if __name__ == "__main__":
    main()
