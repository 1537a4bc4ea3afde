"""ai.onnx.ml tree ensembles (TreeEnsembleRegressor/Classifier at opsets 1 and 3, TreeEnsemble at opset 5) from
trees trained by scikit-learn on its bundled datasets, written out as converters write them, against ONNX Runtime
and ONNX's reference evaluator: every comparison mode, NaN routing, aggregates, the binary and multi-class
classifier forms, set membership, double thresholds, batch sizes; malformed ensembles refused with the reason."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
sklearn = pytest.importorskip("sklearn")
from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402
from sklearn.datasets import load_diabetes, load_digits, load_iris  # noqa: E402
from sklearn.ensemble import GradientBoostingClassifier, GradientBoostingRegressor, RandomForestClassifier  # noqa: E402
from sklearn.ensemble import RandomForestRegressor  # noqa: E402
from sklearn.tree import DecisionTreeRegressor  # noqa: E402

import cuvil  # noqa: E402

ML = "ai.onnx.ml"
F, D, I64 = TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.INT64


def model(node, inputs, outputs, ml_opset=3):
    g = helper.make_graph([node], "trees", inputs, outputs)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(ML, ml_opset)])
    m.ir_version = 9
    return m


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def sklearn_nodes(trees):
    """The nodes_* attributes (opset 3) of sklearn trees (x <= threshold goes left), and each leaf's
    (tree id, node id, value array)."""
    a = {k: [] for k in ("nodes_treeids", "nodes_nodeids", "nodes_featureids", "nodes_modes", "nodes_values",
                         "nodes_truenodeids", "nodes_falsenodeids", "nodes_missing_value_tracks_true")}
    leaves = []
    for t, est in enumerate(trees):
        tr = est.tree_
        for i in range(tr.node_count):
            leaf = tr.children_left[i] == -1
            a["nodes_treeids"].append(t)
            a["nodes_nodeids"].append(i)
            a["nodes_featureids"].append(0 if leaf else int(tr.feature[i]))
            a["nodes_modes"].append("LEAF" if leaf else "BRANCH_LEQ")
            a["nodes_values"].append(0.0 if leaf else float(tr.threshold[i]))
            a["nodes_truenodeids"].append(0 if leaf else int(tr.children_left[i]))
            a["nodes_falsenodeids"].append(0 if leaf else int(tr.children_right[i]))
            a["nodes_missing_value_tracks_true"].append(0)
            if leaf:
                leaves.append((t, i, tr.value[i]))
    return a, leaves


def class_weights(leaves, classes, scale=1.0):
    """The class_* attributes of a classifier whose leaves hold each class's share of their samples (times
    `scale`: 1 / the number of trees for a forest's mean)."""
    cls = {"class_treeids": [], "class_nodeids": [], "class_ids": [], "class_weights": []}
    for t, i, v in leaves:
        p = v[0] / v[0].sum()
        for k in range(classes):
            cls["class_treeids"].append(t)
            cls["class_nodeids"].append(i)
            cls["class_ids"].append(k)
            cls["class_weights"].append(float(p[k]) * scale)
    return cls


def run_both(m, feeds, tmp_path, rtol=1e-5, atol=1e-5, reference=False):
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    compiled = cuvil.load_onnx(str(path))
    got = compiled(**feeds)
    got = list(got) if isinstance(got, (tuple, list)) else [got]
    if reference:
        want = ReferenceEvaluator(m).run(None, feeds)
    else:
        so = ort.SessionOptions()
        so.log_severity_level = 3
        want = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"]).run(None, feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g = np.asarray(g)
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
    return compiled, got


def test_random_forest_regressor_two_targets_average(tmp_path):
    x, y = load_diabetes(return_X_y=True)
    y2 = np.stack([y, np.sqrt(y)], axis=1)
    rf = RandomForestRegressor(n_estimators=12, max_depth=7, random_state=0).fit(x, y2)
    a, leaves = sklearn_nodes(rf.estimators_)
    tgt = {"target_treeids": [], "target_nodeids": [], "target_ids": [], "target_weights": []}
    for t, i, v in leaves:
        for k in range(2):
            tgt["target_treeids"].append(t)
            tgt["target_nodeids"].append(i)
            tgt["target_ids"].append(k)
            tgt["target_weights"].append(float(v[k][0]))
    node = helper.make_node("TreeEnsembleRegressor", ["x"], ["y"], domain=ML, n_targets=2,
                            aggregate_function="AVERAGE", **a, **tgt)
    m = model(node, [vi("x", F, ["n", 10])], [vi("y", F, ["n", 2])])
    xs = x.astype(np.float32)
    compiled, (got,) = run_both(m, {"x": xs}, tmp_path)
    for n in (1, 7):  # one compiled model across batch sizes
        np.testing.assert_allclose(compiled(x=xs[:n]), got[:n], rtol=1e-6)
    # Float thresholds move a few splits (sklearn's are doubles midway between two data values): with the double
    # thresholds (nodes_values_as_tensor) the model is sklearn's, which compares float32 inputs in double.
    values = a.pop("nodes_values")
    node = helper.make_node("TreeEnsembleRegressor", ["x"], ["y"], domain=ML, n_targets=2,
                            aggregate_function="AVERAGE", **a, **tgt,
                            nodes_values_as_tensor=helper.make_tensor("v", D, [len(values)], [
                                float(t) for e in rf.estimators_ for t in e.tree_.threshold]))
    m = model(node, [vi("x", F, ["n", 10])], [vi("y", F, ["n", 2])])
    path = tmp_path / "m64.onnx"
    onnx.save(m, str(path))  # (ONNX's reference evaluator reads only nodes_values, not nodes_values_as_tensor)
    np.testing.assert_allclose(cuvil.load_onnx(str(path))(x=xs), rf.predict(xs), rtol=1e-5)


def test_gradient_boosting_regressor_sum_and_base(tmp_path):
    x, y = load_diabetes(return_X_y=True)
    gb = GradientBoostingRegressor(n_estimators=40, max_depth=3, learning_rate=0.1, random_state=0).fit(x, y)
    a, leaves = sklearn_nodes(gb.estimators_[:, 0])
    node = helper.make_node("TreeEnsembleRegressor", ["x"], ["y"], domain=ML, n_targets=1,
                            base_values=[float(gb.init_.constant_[0][0])],
                            target_treeids=[t for t, _, _ in leaves], target_nodeids=[i for _, i, _ in leaves],
                            target_ids=[0] * len(leaves),
                            target_weights=[float(v[0][0]) * 0.1 for _, _, v in leaves], **a)
    m = model(node, [vi("x", D, ["n", 10])], [vi("y", F, ["n", 1])])  # (double input, float output)
    _, (got,) = run_both(m, {"x": x}, tmp_path)
    np.testing.assert_allclose(got[:, 0], gb.predict(x), rtol=1e-5)


def test_random_forest_classifier_probabilities_and_labels(tmp_path):
    x, y = load_digits(return_X_y=True)
    rf = RandomForestClassifier(n_estimators=8, max_depth=9, random_state=0).fit(x, y)
    a, leaves = sklearn_nodes(rf.estimators_)
    cls = class_weights(leaves, 10, 1 / 8)
    node = helper.make_node("TreeEnsembleClassifier", ["x"], ["label", "p"], domain=ML,
                            classlabels_int64s=[100 + k for k in range(10)], **a, **cls)
    m = model(node, [vi("x", F, ["n", 64])], [vi("label", I64, ["n"]), vi("p", F, ["n", 10])])
    xs = x.astype(np.float32)
    _, (label, p) = run_both(m, {"x": xs}, tmp_path)
    np.testing.assert_allclose(p, rf.predict_proba(xs), atol=1e-5)
    assert (label == 100 + rf.predict(xs)).mean() > 0.999  # (ties between equal probabilities aside)


@pytest.mark.parametrize("post", ["LOGISTIC", "NONE", "SOFTMAX"])
def test_binary_boosted_classifier_one_score(tmp_path, post):
    x, y = load_iris(return_X_y=True)
    y = (y == 2).astype(int)
    gb = GradientBoostingClassifier(n_estimators=15, max_depth=2, random_state=0).fit(x, y)
    a, leaves = sklearn_nodes(gb.estimators_[:, 0])
    node = helper.make_node("TreeEnsembleClassifier", ["x"], ["label", "p"], domain=ML, classlabels_int64s=[0, 1],
                            post_transform=post, base_values=[0.3],
                            class_treeids=[t for t, _, _ in leaves], class_nodeids=[i for _, i, _ in leaves],
                            class_ids=[0] * len(leaves), class_weights=[float(v[0][0]) * 0.1 for _, _, v in leaves],
                            **a)
    m = model(node, [vi("x", F, ["n", 4])], [vi("label", I64, ["n"]), vi("p", F, ["n", 2])])
    run_both(m, {"x": x.astype(np.float32)}, tmp_path, reference=True)
    if post == "LOGISTIC":
        run_both(m, {"x": x.astype(np.float32)}, tmp_path)


def random_ensemble(rng, n_trees, depth, features, modes, missing=True):
    """Random complete trees (opset 3 nodes_* lists) with thresholds drawn from a small grid, so that inputs on
    the grid hit every comparison's equality case."""
    a = {k: [] for k in ("nodes_treeids", "nodes_nodeids", "nodes_featureids", "nodes_modes", "nodes_values",
                         "nodes_truenodeids", "nodes_falsenodeids", "nodes_missing_value_tracks_true")}
    leaves = []
    for t in range(n_trees):
        # (node ids shuffled: the lists need not be in tree order)
        count = 2 ** (depth + 1) - 1
        ids = rng.permutation(count) + 3
        order = rng.permutation(count)
        for pos in order:
            leaf = pos >= 2 ** depth - 1
            a["nodes_treeids"].append(t)
            a["nodes_nodeids"].append(int(ids[pos]))
            a["nodes_featureids"].append(int(rng.integers(features)))
            a["nodes_modes"].append("LEAF" if leaf else str(rng.choice(modes)))
            a["nodes_values"].append(float(rng.integers(-3, 4)) / 2)
            a["nodes_truenodeids"].append(0 if leaf else int(ids[2 * pos + 1]))
            a["nodes_falsenodeids"].append(0 if leaf else int(ids[2 * pos + 2]))
            a["nodes_missing_value_tracks_true"].append(int(rng.integers(2)) if missing and not leaf else 0)
            if leaf:
                leaves.append((t, int(ids[pos])))
        # the root must come first among the tree's nodes: move it there
        start = len(a["nodes_treeids"]) - count
        where = start + int(np.where(order == 0)[0][0])
        for k in a:
            a[k][start], a[k][where] = a[k][where], a[k][start]
    return a, leaves


def grid_inputs(rng, n, features):
    x = (rng.integers(-4, 5, (n, features)) / 2).astype(np.float32)
    x[rng.random((n, features)) < 0.1] = np.nan
    return x


@pytest.mark.parametrize("aggregate", ["SUM", "AVERAGE", "MIN", "MAX"])
def test_every_mode_nan_routing_and_aggregates(tmp_path, aggregate):
    rng = np.random.default_rng(1)
    modes = ["BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ"]
    a, leaves = random_ensemble(rng, n_trees=6, depth=4, features=5, modes=modes)
    tgt = {"target_treeids": [], "target_nodeids": [], "target_ids": [], "target_weights": []}
    for t, i in leaves:
        for k in rng.choice(3, size=int(rng.integers(1, 3)), replace=False):  # some leaves vote for one target
            tgt["target_treeids"].append(t)
            tgt["target_nodeids"].append(i)
            tgt["target_ids"].append(int(k))
            tgt["target_weights"].append(float(rng.normal()))
    x = grid_inputs(rng, 300, 5)
    # Against the operator's opset-3 reference without NaN (it sends a NaN down BRANCH_NEQ's false branch unless
    # nodes_missing_value_tracks_true; ONNX Runtime and the opset-5 reference compare it as IEEE does: true).
    for base in ([0.5, -1.0, 2.0], None):
        node = helper.make_node("TreeEnsembleRegressor", ["x"], ["y"], domain=ML, n_targets=3,
                                aggregate_function=aggregate, **a, **tgt, **({"base_values": base} if base else {}))
        m = model(node, [vi("x", F, ["n", 5])], [vi("y", F, ["n", 3])])
        run_both(m, {"x": np.nan_to_num(x, nan=0.25)}, tmp_path, reference=True)
    # Against ONNX Runtime with NaN, where it agrees with the reference: it starts MIN/MAX from the first vote
    # instead of the type's limit and adds no base value to a target no leaf voted for.
    if aggregate in ("SUM", "AVERAGE"):
        run_both(m, {"x": x}, tmp_path)


def test_double_thresholds_compare_in_double(tmp_path):
    # Thresholds between two neighbouring floats: a float comparison would route these inputs the other way.
    t = 1.0 + 2.0 ** -30
    a = {"nodes_treeids": [0, 0, 0], "nodes_nodeids": [0, 1, 2], "nodes_featureids": [0, 0, 0],
         "nodes_modes": ["BRANCH_LT", "LEAF", "LEAF"], "nodes_truenodeids": [1, 0, 0],
         "nodes_falsenodeids": [2, 0, 0]}
    node = helper.make_node("TreeEnsembleRegressor", ["x"], ["y"], domain=ML, n_targets=1,
                            nodes_values_as_tensor=helper.make_tensor("v", D, [3], [t, 0.0, 0.0]),
                            target_treeids=[0, 0], target_nodeids=[1, 2], target_ids=[0, 0],
                            target_weights=[1.0, 2.0], **a)
    m = model(node, [vi("x", D, ["n", 1])], [vi("y", F, ["n", 1])])
    x = np.array([[1.0], [t], [np.nextafter(t, 0)]])
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    # (ONNX's reference evaluator reads only nodes_values, not nodes_values_as_tensor)
    assert cuvil.load_onnx(str(path))(x=x)[:, 0].tolist() == [1.0, 2.0, 1.0]


def v5_from_v3(a, leaves_weights):
    """The same ensemble (one target per leaf) in opset 5's TreeEnsemble form."""
    internal = [k for k, mode in enumerate(a["nodes_modes"]) if mode != "LEAF"]
    leaf_pos = {(a["nodes_treeids"][k], a["nodes_nodeids"][k]): j
                for j, k in enumerate(k for k, mode in enumerate(a["nodes_modes"]) if mode == "LEAF")}
    node_pos = {(a["nodes_treeids"][k], a["nodes_nodeids"][k]): j for j, k in enumerate(internal)}
    codes = {"BRANCH_LEQ": 0, "BRANCH_LT": 1, "BRANCH_GTE": 2, "BRANCH_GT": 3, "BRANCH_EQ": 4, "BRANCH_NEQ": 5}
    out = {k: [] for k in ("nodes_featureids", "nodes_truenodeids", "nodes_trueleafs", "nodes_falsenodeids",
                           "nodes_falseleafs", "nodes_missing_value_tracks_true")}
    splits, modes, roots = [], [], []
    for k in internal:
        t = a["nodes_treeids"][k]
        out["nodes_featureids"].append(a["nodes_featureids"][k])
        for side in ("true", "false"):
            child = (t, a[f"nodes_{side}nodeids"][k])
            is_leaf = child in leaf_pos
            out[f"nodes_{side}nodeids"].append(leaf_pos[child] if is_leaf else node_pos[child])
            out[f"nodes_{side}leafs"].append(int(is_leaf))
        out["nodes_missing_value_tracks_true"].append(a["nodes_missing_value_tracks_true"][k])
        splits.append(a["nodes_values"][k])
        modes.append(codes[a["nodes_modes"][k]])
    seen = set()
    for k, t in enumerate(a["nodes_treeids"]):
        if t not in seen:
            seen.add(t)
            roots.append(node_pos[(t, a["nodes_nodeids"][k])])
    targets = [leaves_weights[key][0] for key in sorted(leaf_pos, key=leaf_pos.get)]
    weights = [leaves_weights[key][1] for key in sorted(leaf_pos, key=leaf_pos.get)]
    return dict(out, tree_roots=roots, leaf_targetids=targets,
                nodes_splits=helper.make_tensor("s", F, [len(splits)], splits),
                nodes_modes=helper.make_tensor("m", TensorProto.UINT8, [len(modes)], modes),
                leaf_weights=helper.make_tensor("w", F, [len(weights)], weights))


@pytest.mark.parametrize("aggregate", [0, 1, 2, 3])
def test_opset5_tree_ensemble_matches_reference(tmp_path, aggregate):
    rng = np.random.default_rng(2)
    modes = ["BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ"]
    a, leaves = random_ensemble(rng, n_trees=5, depth=3, features=4, modes=modes)
    lw = {key: (int(rng.integers(2)), float(rng.normal())) for key in leaves}
    node = helper.make_node("TreeEnsemble", ["x"], ["y"], domain=ML, n_targets=2, aggregate_function=aggregate,
                            **v5_from_v3(a, lw))
    m = model(node, [vi("x", F, ["n", 4])], [vi("y", F, ["n", 2])], ml_opset=5)
    # (ONNX Runtime starts MIN/MAX from the first vote; the reference from the type's limit, as Cuvil)
    run_both(m, {"x": grid_inputs(rng, 200, 4)}, tmp_path, reference=aggregate >= 2)


def test_opset5_set_membership_and_single_leaf_tree(tmp_path):
    # tree 0: x0 in {1, 3, 5} ? (x1 <= 0 ? leaf 0 : leaf 1) : leaf 2;  tree 1: one leaf (3)
    node = helper.make_node(
        "TreeEnsemble", ["x"], ["y"], domain=ML, n_targets=1, tree_roots=[0, 2],
        nodes_featureids=[0, 1, 0], nodes_modes=helper.make_tensor("m", TensorProto.UINT8, [3], [6, 0, 0]),
        nodes_splits=helper.make_tensor("s", F, [3], [0.0, 0.0, 0.0]),
        nodes_truenodeids=[1, 0, 3], nodes_trueleafs=[0, 1, 1], nodes_falsenodeids=[2, 1, 3],
        nodes_falseleafs=[1, 1, 1], nodes_missing_value_tracks_true=[1, 0, 0],
        membership_values=helper.make_tensor("mv", F, [4], [1.0, 3.0, 5.0, np.nan]),
        leaf_targetids=[0, 0, 0, 0], leaf_weights=helper.make_tensor("w", F, [4], [1.0, 10.0, 100.0, 1000.0]))
    m = model(node, [vi("x", F, ["n", 2])], [vi("y", F, ["n", 1])], ml_opset=5)
    x = np.array([[1, -1], [3, 2], [2, -1], [np.nan, 1], [5, 0]], dtype=np.float32)
    # (ONNX's reference reads a one-leaf tree's weight at the root's node index; ONNX Runtime and Cuvil at the
    # leaf its branches name)
    _, (got,) = run_both(m, {"x": x}, tmp_path)
    assert got[:, 0].tolist() == [1001.0, 1010.0, 1100.0, 1010.0, 1001.0]


def test_large_batch_runs_on_threads_like_one_row_at_a_time(tmp_path):
    rng = np.random.default_rng(3)
    a, leaves = random_ensemble(rng, n_trees=20, depth=6, features=8, modes=["BRANCH_LEQ", "BRANCH_GT"])
    node = helper.make_node("TreeEnsembleRegressor", ["x"], ["y"], domain=ML, n_targets=1,
                            target_treeids=[t for t, _ in leaves], target_nodeids=[i for _, i in leaves],
                            target_ids=[0] * len(leaves), target_weights=list(rng.normal(size=len(leaves))), **a)
    m = model(node, [vi("x", F, ["n", 8])], [vi("y", F, ["n", 1])])
    x = grid_inputs(rng, 20000, 8)
    compiled, (got,) = run_both(m, {"x": x}, tmp_path)
    one = np.concatenate([compiled(x=x[i:i + 1]) for i in range(0, 20000, 997)])
    np.testing.assert_array_equal(one, got[::997])


def bad(**changes):
    a = {"nodes_treeids": [0, 0, 0], "nodes_nodeids": [0, 1, 2], "nodes_featureids": [0, 0, 0],
         "nodes_modes": ["BRANCH_LEQ", "LEAF", "LEAF"], "nodes_values": [0.5, 0.0, 0.0],
         "nodes_truenodeids": [1, 0, 0], "nodes_falsenodeids": [2, 0, 0],
         "target_treeids": [0, 0], "target_nodeids": [1, 2], "target_ids": [0, 0], "target_weights": [1.0, 2.0]}
    a.update(changes)
    return a


@pytest.mark.parametrize("changes,message", [
    (dict(nodes_truenodeids=[0, 0, 0]), "reached twice"),                 # a cycle: the root's true branch is itself
    (dict(nodes_falsenodeids=[7, 0, 0]), "names node 7, which the tree lacks"),
    (dict(nodes_modes=["BRANCH_SOMETIMES", "LEAF", "LEAF"]), "mode 'BRANCH_SOMETIMES'"),
    (dict(target_nodeids=[1, 0]), "not a leaf"),
    (dict(nodes_nodeids=[0, 1, 1]), "lists node 1 twice"),
])
def test_malformed_ensembles_are_refused_with_the_reason(tmp_path, changes, message):
    node = helper.make_node("TreeEnsembleRegressor", ["x"], ["y"], domain=ML, n_targets=1, **bad(**changes))
    path = tmp_path / "bad.onnx"
    onnx.save(model(node, [vi("x", F, ["n", 1])], [vi("y", F, ["n", 1])]), str(path))
    with pytest.raises(cuvil.CompileError, match=message):
        cuvil.load_onnx(str(path))


def test_refused_forms_and_run_time_feature_check(tmp_path):
    path = tmp_path / "m.onnx"
    # (string class labels run: test_onnx_strings.py; both kinds at once are refused)
    node = helper.make_node("TreeEnsembleClassifier", ["x"], ["label", "p"], domain=ML, classlabels_strings=["a", "b"],
                            classlabels_int64s=[0, 1], **{k.replace("target", "class"): v for k, v in bad().items()})
    onnx.save(model(node, [vi("x", F, ["n", 1])], [vi("label", TensorProto.STRING, ["n"]), vi("p", F, ["n", 2])]),
              str(path))
    with pytest.raises(cuvil.CompileError, match="classlabels_int64s and classlabels_strings are both set"):
        cuvil.load_onnx(str(path))
    node = helper.make_node("TreeEnsembleRegressor", ["x"], ["y"], domain=ML, n_targets=1, post_transform="PROBIT",
                            **bad())
    onnx.save(model(node, [vi("x", F, ["n", 1])], [vi("y", F, ["n", 1])]), str(path))
    with pytest.raises(cuvil.CompileError, match="PROBIT"):
        cuvil.load_onnx(str(path))
    # a split on feature 3 of inputs with one feature: a clear error when the width is known only at run time
    node = helper.make_node("TreeEnsembleRegressor", ["x"], ["y"], domain=ML, n_targets=1,
                            **bad(nodes_featureids=[3, 0, 0]))
    onnx.save(model(node, [vi("x", F, ["n", "f"])], [vi("y", F, ["n", 1])]), str(path))
    compiled = cuvil.load_onnx(str(path))
    assert compiled(x=np.zeros((2, 4), np.float32)).tolist() == [[1.0], [1.0]]
    with pytest.raises(cuvil.RunError, match="feature 3"):
        compiled(x=np.zeros((2, 1), np.float32))
