"""The corpus of real models (scripts/model_corpus.py): every model loads on Cuvil and matches ONNX Runtime's stored
outputs — rel. L2 <= 1e-4 for fp32 models; float16 and int8 variants may differ from their fp32 model's outputs at
most twice as much as ONNX Runtime's run of the variant does (at least 1e-3). The corpus is built once and cached (~/.cache/cuvil/corpus-<hash>);
CUVIL_CORPUS_DIR moves the cache."""
import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("torch")

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import model_corpus  # noqa: E402

NAMES = [e.name for e in model_corpus.entries()]


@pytest.fixture(scope="module")
def manifest():
    root = model_corpus.build(verbose=False)
    return json.loads((root / "manifest.json").read_text())


@pytest.mark.parametrize("name", NAMES)
def test_corpus_model_matches_onnxruntime(manifest, name):
    item = manifest[name]
    assert "error" not in item, f"the corpus could not make {name}: {item['error']}"
    r = model_corpus.check(name, item, manifest)
    assert r["loads"], f"{name} ({item['source']}) does not load: {r['error']}"
    assert r["ok"], f"{name}: rel. L2 {r['err']:.3g} > {r['bound']:.3g} (to ONNX Runtime on the same model: {r['rel_l2']:.3g})"
