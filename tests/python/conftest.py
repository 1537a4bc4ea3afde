import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
sys.path.insert(0, os.path.join(ROOT, "python"))  # the cuvil package, with the extension built into it
CUVIL = os.path.join(ROOT, "build", "bin", "cuvil")
# The compiled-model cache (cuvil.cache) stays out of the tests (and their subprocesses): a hit would skip the
# compile a test means to exercise. tests/python/test_compile_cache.py turns it on in a temporary directory.
os.environ.setdefault("CUVIL_MODEL_CACHE", "off")


@pytest.fixture(scope="session")
def cuvil_bin():
    assert os.path.exists(CUVIL), f"{CUVIL} is missing: build first (scripts/build.sh)"
    return CUVIL


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("models"))
