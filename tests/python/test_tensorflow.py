"""cuvil.compile on TensorFlow: Keras models and tf.functions, converted in-process through tf2onnx
(frontend/tensorflow.py), against TensorFlow's own outputs."""
import os

import numpy as np
import pytest

import cuvil

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
tf = pytest.importorskip("tensorflow")
pytest.importorskip("tf2onnx")
import keras  # noqa: E402


def rel_l2(got, want) -> float:
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30))


# Keras Applications with random weights and no softmax (random logits make softmax outputs near-uniform, which
# would hide errors). Small inputs keep the test quick; the graphs are the full architectures.
APPLICATIONS = [
    ("MobileNetV2", 64),        # depthwise convolutions, ReLU6, residual adds
    ("EfficientNetB0", 64),     # swish, squeeze-and-excitation, the Rescaling/Normalization preprocessing layers
    ("MobileNetV3Small", 64),   # hard-swish, hard-sigmoid
    ("DenseNet121", 32),        # concatenations, BatchNorm before convolutions
]


@pytest.mark.parametrize("name,size", APPLICATIONS, ids=[a for a, _ in APPLICATIONS])
def test_keras_applications_match_tensorflow(name, size):
    keras.utils.set_random_seed(0)
    model = getattr(keras.applications, name)(weights=None, input_shape=(size, size, 3), classifier_activation=None)
    compiled = cuvil.compile(model)  # no examples: the declared input shape, its open batch dim a symbol
    assert compiled.input_types == [f"f32[batch, {size}, {size}, 3]"]
    rng = np.random.default_rng(1)
    for batch in (1, 3):  # one compiled object across batch sizes
        x = (rng.random((batch, size, size, 3)) * 255).astype(np.float32)
        want = model(x, training=False).numpy()
        got = compiled(x)
        assert got.shape == want.shape
        assert rel_l2(got, want) < 1e-4, (name, batch, rel_l2(got, want))


def test_keras_recurrent_text_model():
    keras.utils.set_random_seed(0)
    tokens = keras.Input((None,), dtype="int32", name="tokens")
    h = keras.layers.Embedding(50, 16)(tokens)
    h = keras.layers.LSTM(24, return_sequences=True)(h)
    h = keras.layers.GRU(12)(h)
    model = keras.Model(tokens, keras.layers.Dense(3)(h))
    compiled = cuvil.compile(model)
    assert compiled.input_types == ["i32[batch, tokens_1]"]
    rng = np.random.default_rng(2)
    for batch, steps in ((1, 5), (4, 11)):
        x = rng.integers(0, 50, (batch, steps)).astype(np.int32)
        assert rel_l2(compiled(x), model(x).numpy()) < 1e-4


def test_keras_multiple_outputs_keep_their_structure():
    feat = keras.Input((8,), name="feat")
    h = keras.layers.Dense(16, activation="relu")(feat)
    model = keras.Model(feat, {"zz": keras.layers.Dense(3)(h), "aa": keras.layers.Dense(5)(h)})
    x = np.random.default_rng(3).standard_normal((2, 8)).astype(np.float32)
    got, want = cuvil.compile(model)(x), model(x)
    assert set(got) == {"zz", "aa"}
    for k in want:
        np.testing.assert_allclose(got[k], want[k].numpy(), rtol=1e-5, atol=1e-6)


@tf.function
def _branchy(x, y):
    if tf.reduce_sum(x) > 0:  # data-dependent: autograph makes it a tf.cond, tf2onnx an ONNX If
        z = x * 2.0
    else:
        z = x - y
    return {"s": z, "t": (tf.nn.relu(y), x + y)}


def test_tf_function_with_data_dependent_branch():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    y = rng.standard_normal((3, 4)).astype(np.float32)
    compiled = cuvil.compile(_branchy, (x, y), dynamic_shapes={"x": {0: "n"}, "y": {0: "n"}})
    assert compiled.input_names == ["x", "y"]
    assert compiled.input_types == ["f32[n, 4]", "f32[n, 4]"]
    for sign in (1.0, -1.0):  # both branches taken
        for n in (3, 7):
            a = np.abs(rng.standard_normal((n, 4)).astype(np.float32)) * sign
            b = rng.standard_normal((n, 4)).astype(np.float32)
            got, want = compiled(a, b), _branchy(a, b)
            assert set(got) == {"s", "t"} and isinstance(got["t"], tuple)
            for g, w in zip(tf.nest.flatten(got), tf.nest.flatten(want)):
                np.testing.assert_array_equal(g, w.numpy())


def test_tf_tensors_in_give_tf_tensors_out():
    x = tf.constant(np.arange(12, dtype=np.float32).reshape(3, 4))
    compiled = cuvil.compile(_branchy, (x, x))  # tf.Tensor examples; all dims fixed
    assert compiled.input_types == ["f32[3, 4]", "f32[3, 4]"]
    out = compiled(x, x)
    assert isinstance(out["s"], tf.Tensor)
    np.testing.assert_array_equal(out["s"].numpy(), (x * 2.0).numpy())
    with pytest.raises(cuvil.InputError, match="x"):
        compiled(np.zeros((5, 4), np.float32), np.zeros((5, 4), np.float32))  # fixed dims are checked


def test_unconvertible_op_names_the_op_and_node():
    @tf.function
    def f(x):
        return tf.math.erfc(x)  # tf2onnx 1.17 has no conversion for Erfc

    with pytest.raises(cuvil.CompileError, match=r"Erfc \(1 node, e\.g\. '.*Erfc.*'\)"):
        cuvil.compile(f, (np.zeros((2, 2), np.float32),))


def test_bad_arguments():
    @tf.function
    def f(x):
        return x + 1.0

    x = np.zeros((2, 2), np.float32)
    with pytest.raises(cuvil.CompileError, match="example inputs"):
        cuvil.compile(f, None)
    with pytest.raises(ValueError, match="not an input"):
        cuvil.compile(f, (x,), dynamic_shapes={"y": {0: "n"}})
    with pytest.raises(ValueError, match="rank 2"):
        cuvil.compile(f, (x,), dynamic_shapes={"x": {2: "n"}})
    with pytest.raises(cuvil.CompileError, match="positional"):
        cuvil.compile(f, (), {"x": x})


def test_tensorflow_imported_first():
    """TensorFlow loads its framework library globally, exporting its own protobuf (and Triton's LLVM clashes with
    its LLVM): `import tensorflow; import cuvil` must still load and convert (cuvil/__init__.py)."""
    import subprocess
    import sys

    code = ("import tensorflow as tf, numpy as np\n"
            "import cuvil\n"
            "f = tf.function(lambda x: tf.nn.relu(x) * 2.0)\n"
            "x = np.array([[-1.0, 3.0]], np.float32)\n"
            "print(cuvil.compile(f, (x,))(x).tolist())\n")
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(cuvil.__file__)))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == "[[0.0, 6.0]]"
