"""String tensors: ONNX's string ops, Equal / Where / Cast / moves on strings, ai.onnx.ml's LabelEncoder (every
version) and classifiers with string class labels, each against ONNX Runtime; strings in and out of Python
(str, bytes and object arrays), through a .cuv artifact, and the errors bad text and bad patterns give."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

import cuvil  # noqa: E402

S, F, D, I64, B = TensorProto.STRING, TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.INT64, TensorProto.BOOL
ML = "ai.onnx.ml"

WORDS = np.array(["Hello world", "", "  leading and trailing  ", "a,b,,c", "x.y.z", "ÉCOLE straße",
                  "tab\tseparated\nlines", "b", "émile@gmail.com", "www.onnx.ai", "日本語 テキスト", "b"],
                 dtype=object)


def model(nodes, inputs, outputs, opset=20, ml_opset=None, initializers=()):
    g = helper.make_graph(nodes, "strings", inputs, outputs, initializer=list(initializers))
    imports = [helper.make_opsetid("", opset)]
    if ml_opset:
        imports.append(helper.make_opsetid(ML, ml_opset))
    m = helper.make_model(g, opset_imports=imports)
    m.ir_version = 9
    return m


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def strings(name, values, shape=None):
    return helper.make_tensor(name, S, [len(values)] if shape is None else shape,
                              [v.encode() for v in values])


def ort_run(m, feeds, tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    so = ort.SessionOptions()
    so.log_severity_level = 3
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"]).run(None, feeds)


def run_both(m, feeds, tmp_path, peer="ort"):
    want = ort_run(m, feeds, tmp_path)
    if peer == "ref":
        from onnx.reference import ReferenceEvaluator
        want = ReferenceEvaluator(m).run(None, feeds)
    compiled = cuvil.load_onnx(str(tmp_path / "m.onnx"))
    got = compiled(**feeds)
    got = list(got) if isinstance(got, (tuple, list)) else [got]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g = np.asarray(g)
        assert g.shape == w.shape, (g.shape, w.shape)
        if w.dtype == object:
            assert g.dtype == object
            assert g.tolist() == w.tolist()
        else:
            assert g.dtype == w.dtype, (g.dtype, w.dtype)
            np.testing.assert_array_equal(g, w)
    return compiled, got


@pytest.mark.parametrize("delimiter,maxsplit", [(None, None), (" ", None), (",", None), (",", 1), (None, 1),
                                                (".", 0)])
def test_string_split(tmp_path, delimiter, maxsplit):
    attrs = {}
    if delimiter is not None:
        attrs["delimiter"] = delimiter
    if maxsplit is not None:
        attrs["maxsplit"] = maxsplit
    m = model([helper.make_node("StringSplit", ["x"], ["y", "n"], **attrs)], [vi("x", S, [3, 4])],
              [vi("y", S, None), vi("n", I64, None)])
    # Without a delimiter ONNX splits at runs of whitespace (its reference: Python's str.split()); ONNX Runtime
    # splits at spaces only, so tabs and newlines compare with onnx's reference evaluator.
    run_both(m, {"x": WORDS.reshape(3, 4)}, tmp_path, peer="ref" if delimiter is None else "ort")


def test_string_split_empty_input(tmp_path):
    m = model([helper.make_node("StringSplit", ["x"], ["y", "n"])], [vi("x", S, [None])],
              [vi("y", S, None), vi("n", I64, None)])
    _, (y, n) = run_both(m, {"x": np.array([], dtype=object)}, tmp_path)
    assert y.shape == (0, 0) and n.shape == (0,)


def test_concat_regex_equal_where_and_moves(tmp_path):
    # Every op that only moves strings (Reshape, Transpose, Gather, Slice, Concat, Identity, Where) runs on the
    # pointers and the runtime copies the text they pick: the results must not depend on freed inputs. Checked
    # against onnx's reference evaluator: ONNX Runtime 1.32 returns empty strings for this chain's last output.
    nodes = [
        helper.make_node("StringConcat", ["x", "suffix"], ["cat"]),
        helper.make_node("RegexFullMatch", ["x"], ["mail"], pattern=r"[a-zé.-]+@(gmail|yahoo)\.com"),
        helper.make_node("Equal", ["x", "b"], ["is_b"]),
        helper.make_node("Where", ["is_b", "cat", "x"], ["picked"]),
        helper.make_node("Reshape", ["picked", "shape"], ["grid"]),
        helper.make_node("Transpose", ["grid"], ["t"], perm=[1, 0]),
        helper.make_node("Gather", ["t", "rows"], ["g"], axis=0),
        helper.make_node("Slice", ["g", "starts", "ends", "axes"], ["sl"]),
        helper.make_node("Concat", ["sl", "sl"], ["twice"], axis=0),
        helper.make_node("Identity", ["twice"], ["out"]),
    ]
    inits = [strings("suffix", ["!"], []), strings("b", ["b"], []),
             helper.make_tensor("shape", I64, [2], [3, 4]), helper.make_tensor("rows", I64, [3], [3, 0, 2]),
             helper.make_tensor("starts", I64, [1], [1]), helper.make_tensor("ends", I64, [1], [3]),
             helper.make_tensor("axes", I64, [1], [1])]
    m = model(nodes, [vi("x", S, [12])], [vi("cat", S, None), vi("mail", B, None), vi("out", S, None)],
              initializers=inits)
    _, (_, mail, _) = run_both(m, {"x": WORDS}, tmp_path, peer="ref")
    assert mail.sum() == 1


@pytest.mark.parametrize("pattern", [r"\w+", r"[^@]+@[^@]+\.(com|org)", r"(?i)b", r"", r".*\s.*", r"\p{Han}+.*"])
def test_regex_full_match_is_re2(tmp_path, pattern):
    # RE2's syntax and semantics, as ONNX specifies and ONNX Runtime runs (\w is ASCII there, unlike Python's re).
    m = model([helper.make_node("RegexFullMatch", ["x"], ["y"], pattern=pattern)], [vi("x", S, [12])],
              [vi("y", B, None)])
    run_both(m, {"x": WORDS}, tmp_path)


def test_string_concat_broadcasts(tmp_path):
    m = model([helper.make_node("StringConcat", ["x", "y"], ["z"])], [vi("x", S, [2, 1]), vi("y", S, [3])],
              [vi("z", S, None)])
    run_both(m, {"x": np.array([["a"], ["ü"]], dtype=object), "y": np.array(["1", "", "三"], dtype=object)},
             tmp_path)


@pytest.mark.parametrize("action", ["NONE", "LOWER", "UPPER"])
@pytest.mark.parametrize("sensitive", [0, 1])
def test_string_normalizer(tmp_path, action, sensitive):
    m = model([helper.make_node("StringNormalizer", ["x"], ["y"], case_change_action=action,
                                is_case_sensitive=sensitive, stopwords=["monday", "Tuesday"],
                                locale="C.UTF-8")],  # (ONNX Runtime's default, en_US, is not installed here)
              [vi("x", S, [1, None])], [vi("y", S, None)], opset=17)
    x = np.array([["Monday", "monday", "tuesday", "Wednesday", "ÉCOLE", "straße", "Ünïcödé"]], dtype=object)
    run_both(m, {"x": x}, tmp_path)
    # Every element a stop word: one empty string remains.
    run_both(m, {"x": np.array([["monday", "Tuesday"]], dtype=object)}, tmp_path)


def test_cast_between_strings_and_numbers(tmp_path):
    nodes = [helper.make_node("Cast", ["f"], ["f_text"], to=S), helper.make_node("Cast", ["i"], ["i_text"], to=S),
             helper.make_node("Cast", ["text"], ["parsed"], to=F),
             helper.make_node("Cast", ["itext"], ["parsed_i"], to=TensorProto.INT32)]
    m = model(nodes, [vi("f", F, [7]), vi("i", I64, [3]), vi("text", S, [6]), vi("itext", S, [3])],
              [vi("f_text", S, None), vi("i_text", S, None), vi("parsed", F, None), vi("parsed_i", TensorProto.INT32, None)])
    feeds = {"f": np.array([0.5, 0.1, 0.039187793, 123.25, -2.0, 3e-7, 1.5e20], np.float32),
             "i": np.array([0, -7, 2**62], np.int64),
             "text": np.array(["1.5", "-0.25", "1e-3", "+4", "INF", "-inf"], dtype=object),
             "itext": np.array(["12", "-3", "+8"], dtype=object)}
    got = cuvil.load_onnx(_save(m, tmp_path))(**feeds)
    want = ort_run(m, feeds, tmp_path)
    # Numbers read from text as ONNX Runtime reads them.
    np.testing.assert_array_equal(got[2], want[2])
    np.testing.assert_array_equal(got[3], want[3])
    assert got[1].tolist() == want[1].tolist() == ["0", "-7", str(2**62)]
    # Floats written as NumPy writes them (onnx's test data): the shortest text that reads back the same.
    assert got[0].tolist() == [str(v) for v in feeds["f"]]
    assert np.array_equal(np.array(got[0].tolist(), dtype=np.float32), feeds["f"])


def test_cast_of_text_that_is_no_number_fails_clearly(tmp_path):
    m = model([helper.make_node("Cast", ["t"], ["y"], to=F)], [vi("t", S, [2])], [vi("y", F, None)])
    compiled = cuvil.load_onnx(_save(m, tmp_path))
    with pytest.raises(cuvil.Error, match=r'element 1 \("1.5x"\) is not a f32 value'):
        compiled(np.array(["1", "1.5x"], dtype=object))


def test_bad_regex_is_refused_at_load(tmp_path):
    m = model([helper.make_node("RegexFullMatch", ["x"], ["y"], pattern="(unclosed")], [vi("x", S, [2])],
              [vi("y", B, None)])
    with pytest.raises(cuvil.Error, match="not a valid RE2 expression"):
        cuvil.load_onnx(_save(m, tmp_path))


def test_python_string_arrays_of_every_kind(tmp_path):
    m = model([helper.make_node("StringConcat", ["x", "x"], ["y"])], [vi("x", S, [2])], [vi("y", S, None)])
    compiled = cuvil.load_onnx(_save(m, tmp_path))
    for x in (np.array(["ab", "ç"]), np.array([b"ab", "ç".encode()]), np.array(["ab", "ç"], dtype=object),
              np.array([b"ab", "ç"], dtype=object)):
        y = compiled(x)
        assert y.dtype == object and y.tolist() == ["abab", "çç"], x
    with pytest.raises(cuvil.InputError, match="expected dtype str"):
        compiled(np.array([1.0, 2.0], np.float32))
    with pytest.raises(cuvil.InputError, match="holds a int"):
        compiled(np.array(["a", 3], dtype=object))


def test_strings_survive_the_artifact(tmp_path):
    m = model([helper.make_node("StringConcat", ["x", "suffix"], ["y"]),
               helper.make_node("Equal", ["y", "want"], ["eq"])],
              [vi("x", S, [3])], [vi("y", S, None), vi("eq", B, None)],
              initializers=[strings("suffix", ['"quoted"\n\\ ü'], []), strings("want", ['b"quoted"\n\\ ü'], [])])
    compiled = cuvil.load_onnx(_save(m, tmp_path))
    x = np.array(["a", "b", ""], dtype=object)
    y, eq = compiled(x)
    compiled.save(str(tmp_path / "m.cuv"))
    loaded = cuvil.load(str(tmp_path / "m.cuv"))
    y2, eq2 = loaded(x)
    assert y2.tolist() == y.tolist() == [s + '"quoted"\n\\ ü' for s in ["a", "b", ""]]
    assert eq2.tolist() == eq.tolist() == [False, True, False]


def _save(m, tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    return str(path)


# ---- ai.onnx.ml: LabelEncoder and string class labels

@pytest.mark.parametrize("case", ["str_to_int", "int_to_str", "float_to_float", "str_to_float", "v1_names"])
def test_label_encoder_versions(tmp_path, case):
    if case == "str_to_int":
        attrs = dict(keys_strings=["cat", "dog", "émeu"], values_int64s=[3, 1, 7], default_int64=-9)
        x, xt, yt, opset = np.array(["dog", "cat", "bird", "émeu", ""], dtype=object), S, I64, 2
    elif case == "int_to_str":
        attrs = dict(keys_int64s=[5, 2, -1], values_strings=["five", "two", "minus one"])
        x, xt, yt, opset = np.array([[2, 5], [3, -1]], np.int64), I64, S, 2
    elif case == "float_to_float":
        attrs = dict(keys_floats=[0.5, 1.0, float("nan")], values_floats=[10.0, 20.0, 30.0], default_float=-1.0)
        x, xt, yt, opset = np.array([1.0, 0.5, np.nan, 2.0], np.float32), F, F, 2
    elif case == "str_to_float":
        attrs = dict(keys_strings=["a", "b"], values_floats=[0.25, -4.0])
        x, xt, yt, opset = np.array(["b", "z", "a"], dtype=object), S, F, 2
    else:
        attrs = dict(classes_strings=["zero", "one", "two"], default_int64=42)
        x, xt, yt, opset = np.array(["two", "one", "many"], dtype=object), S, I64, 1
    m = model([helper.make_node("LabelEncoder", ["x"], ["y"], domain=ML, **attrs)], [vi("x", xt, list(x.shape))],
              [vi("y", yt, None)], opset=17, ml_opset=opset)
    run_both(m, {"x": x}, tmp_path)


def test_label_encoder_v4_tensor_attributes(tmp_path):
    node = helper.make_node("LabelEncoder", ["x"], ["y"], domain=ML,
                            keys_tensor=strings("k", ["a", "b", "c"]),
                            values_tensor=helper.make_tensor("v", TensorProto.INT16, [3], [7, -8, 9]),
                            default_tensor=helper.make_tensor("d", TensorProto.INT16, [1], [42]))
    m = model([node], [vi("x", S, [5])], [vi("y", TensorProto.INT16, None)], opset=17, ml_opset=4)
    run_both(m, {"x": np.array(["c", "a", "q", "b", "a"], dtype=object)}, tmp_path)


def test_linear_classifier_with_string_labels(tmp_path):
    rng = np.random.default_rng(3)
    coef = rng.standard_normal((3, 4)).astype(np.float32)
    node = helper.make_node("LinearClassifier", ["x"], ["label", "scores"], domain=ML,
                            coefficients=coef.ravel().tolist(), intercepts=[0.1, -0.2, 0.05],
                            classlabels_strings=["setosa", "versicolor", "virginica"], post_transform="SOFTMAX")
    m = model([node], [vi("x", F, [None, 4])], [vi("label", S, None), vi("scores", F, None)], opset=17,
              ml_opset=1)
    x = rng.standard_normal((9, 4)).astype(np.float32)
    want = ort_run(m, {"x": x}, tmp_path)
    label, scores = cuvil.load_onnx(str(tmp_path / "m.onnx"))(x)
    assert label.tolist() == want[0].tolist()
    np.testing.assert_allclose(scores, want[1], rtol=1e-5, atol=1e-6)


def test_tree_classifier_with_string_labels(tmp_path):
    pytest.importorskip("sklearn")
    from sklearn.datasets import load_iris
    from sklearn.tree import DecisionTreeClassifier
    x, y = load_iris(return_X_y=True)
    from test_onnx_trees import class_weights, sklearn_nodes
    a, leaves = sklearn_nodes([DecisionTreeClassifier(max_depth=4, random_state=0).fit(x, y)])
    c = class_weights(leaves, 3)
    node = helper.make_node("TreeEnsembleClassifier", ["x"], ["label", "probs"], domain=ML,
                            classlabels_strings=["setosa", "versicolor", "virginica"], **a, **c)
    m = model([node], [vi("x", F, [None, 4])], [vi("label", S, None), vi("probs", F, None)], opset=17,
              ml_opset=3)
    run_both(m, {"x": x.astype(np.float32)}, tmp_path)


def test_strings_through_a_loop(tmp_path):
    # Carried and scanned string values: the stacked scan output must hold the text of iterations that are gone.
    body = helper.make_graph(
        [helper.make_node("StringConcat", ["s_in", "suffix"], ["s_out"]),
         helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Identity", ["s_out"], ["scan"])],
        "body", [vi("i", I64, []), vi("cond_in", B, []), vi("s_in", S, [2])],
        [vi("cond_out", B, []), vi("s_out", S, [2]), vi("scan", S, [2])],
        initializer=[strings("suffix", ["+é"], [])])
    m = model([helper.make_node("Loop", ["n", "", "s0"], ["s_final", "all"], body=body)],
              [vi("n", I64, []), vi("s0", S, [2])], [vi("s_final", S, None), vi("all", S, None)])
    run_both(m, {"n": np.array(4, np.int64), "s0": np.array(["a", ""], dtype=object)}, tmp_path)
