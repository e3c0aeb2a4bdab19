"""The evaluation maths against scikit-learn's Ridge and LogisticRegression and a brute-force k-NN (NumPy only)."""

import keras
import numpy as np
import pytest

from keras_vit import evaluation
from keras_vit.evaluation import fewshot_lsr

pytestmark = pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="NumPy maths: one backend is enough")


def _clusters(num_classes, per_class, dim, spread=1.0, seed=0):
    """Gaussian clusters around fixed random centres (the same for every `seed`): features and labels."""
    centres = np.random.default_rng(1234).normal(size=(num_classes, dim)) * 2.0
    rng = np.random.default_rng(seed)
    labels = np.repeat(np.arange(num_classes), per_class)
    features = centres[labels] + spread * rng.normal(size=(len(labels), dim))
    return features.astype("float32"), labels


@pytest.mark.parametrize("num_points, dim", [(60, 8), (12, 40)], ids=["N>=D: eigh of XtX", "D>N: eigh of XXt"])
@pytest.mark.parametrize("l2", [2.0**10, 0.5])
def test_ridge_predictions_equal_scikit_learn_ridge(num_points, dim, l2):
    from sklearn.linear_model import Ridge

    num_classes = 4
    features, labels = _clusters(num_classes, num_points // num_classes, dim)
    test, _ = _clusters(num_classes, 5, dim, seed=1)
    solver = evaluation.RidgeSolver(features, labels, num_classes)
    # The big_vision preprocessing, written out: the few-shot set's own mean and std (+1e-5), a bias feature 100.
    x = features.astype("float64")
    mean, std = x.mean(axis=0), x.std(axis=0) + 1e-5

    def prepared(values):
        return np.hstack([(values.astype("float64") - mean) / std, np.full((len(values), 1), 100.0)])

    targets = 2.0 * np.eye(num_classes)[labels] - 1.0
    reference = Ridge(alpha=l2, fit_intercept=False, solver="cholesky").fit(prepared(features), targets)
    np.testing.assert_allclose(solver.predict(test, l2), reference.predict(prepared(test)), rtol=0, atol=1e-6)
    # The same decomposition serves another strength.
    reference.set_params(alpha=l2 * 8).fit(prepared(features), targets)
    np.testing.assert_allclose(solver.predict(test, l2 * 8), reference.predict(prepared(test)), rtol=0, atol=1e-6)


def test_fewshot_accuracy_is_the_argmax_of_the_ridge_on_each_draw():
    train, train_y = _clusters(5, 30, 16, spread=2.0)
    test, test_y = _clusters(5, 20, 16, spread=2.0, seed=3)
    results = evaluation.fewshot(train, train_y, test, test_y, shots=(1, 5), seeds=3, seed=7)
    assert sorted(results) == [1, 5]
    for count, result in results.items():
        assert result.accuracies.shape == (3,) and np.all(result.l2 == fewshot_lsr.DEFAULT_L2)
        for draw, accuracy in enumerate(result.accuracies):
            # The same draw, rebuilt from its documented seeding.
            chosen = evaluation.draw_shots(train_y, count, np.random.default_rng([7, draw, count]), 5)
            assert np.bincount(train_y[chosen]).tolist() == [count] * 5
            solver = evaluation.RidgeSolver(train[chosen], train_y[chosen], 5)
            assert accuracy == np.mean(solver.predict(test, fewshot_lsr.DEFAULT_L2).argmax(axis=1) == test_y)
        assert (result.mean, result.std) == pytest.approx((np.mean(result.accuracies), np.std(result.accuracies)))
    # An L2 grid: each draw takes a strength of the grid; a grid of one is that fixed strength.
    grid = (1e-3, 1.0, 1e3, 1e6)
    results = evaluation.fewshot(train, train_y, test, test_y, shots=(10,), seeds=2, l2_grid=grid)
    assert set(results[10].l2) <= set(grid)
    single = evaluation.fewshot(train, train_y, test, test_y, shots=(10,), seeds=2, l2_grid=(1e3,))
    fixed = evaluation.fewshot(train, train_y, test, test_y, shots=(10,), seeds=2, l2=1e3)
    np.testing.assert_array_equal(single[10].accuracies, fixed[10].accuracies)


def _brute_force_knn(train, train_y, test, k, temperature, num_classes):
    train = train / np.linalg.norm(train, axis=1, keepdims=True)
    test = test / np.linalg.norm(test, axis=1, keepdims=True)
    predictions = []
    for row in test.astype("float64"):
        similarity = train.astype("float64") @ row
        votes = np.zeros(num_classes)
        for index in np.argsort(-similarity, kind="stable")[:k]:
            votes[train_y[index]] += np.exp(similarity[index] / temperature)
        predictions.append(int(np.argmax(votes)))
    return np.array(predictions)


@pytest.mark.parametrize("k, temperature, chunk_size", [(20, 0.07, 1024), (5, 0.5, 7), (500, 0.07, 64)])
def test_knn_equals_a_brute_force_reference_exactly(k, temperature, chunk_size):
    train, train_y = _clusters(6, 25, 12, spread=2.5)
    test, _ = _clusters(6, 15, 12, spread=2.5, seed=4)
    ours = evaluation.knn_predict(train, train_y, test, k=k, temperature=temperature, chunk_size=chunk_size)
    np.testing.assert_array_equal(ours, _brute_force_knn(train, train_y, test, k, temperature, 6))
    # Votes weigh by similarity: two far neighbours of class 1 lose to a near one of class 0 at a low temperature.
    train = np.array([[1.0, 0.0], [0.0, 1.0], [0.05, 1.0]])
    test = np.array([[1.0, 0.6]])
    assert evaluation.knn_predict(train, np.array([0, 1, 1]), test, k=3, temperature=0.01).tolist() == [0]
    assert evaluation.knn_predict(train, np.array([0, 1, 1]), test, k=3, temperature=100.0).tolist() == [1]


def test_probe_matches_scikit_learn_logistic_regression_and_chooses_its_weight_decay():
    from sklearn.linear_model import LogisticRegression

    train, train_y = _clusters(5, 60, 20, spread=3.0)
    test, test_y = _clusters(5, 60, 20, spread=3.0, seed=5)
    decay = 1e-2
    ours = evaluation.linear_probe(train, train_y, test, test_y, weight_decays=decay)
    mean, std = train.mean(axis=0), train.std(axis=0) + 1e-5
    # Mean loss + decay/2 |W|^2 is scikit-learn's C * sum(loss) + 1/2 |W|^2 with C = 1 / (decay * N).
    reference = LogisticRegression(C=1.0 / (decay * len(train)), max_iter=5000, tol=1e-10)
    reference.fit((train - mean) / std, train_y)
    theirs = reference.score((test - mean) / std, test_y)
    assert 0.3 < theirs < 0.99  # a problem where the probe can be wrong, so agreement means something
    assert abs(ours.accuracy - theirs) <= 0.005
    assert ours.weight_decay == decay and ours.holdout_accuracies == {}
    # Several strengths: the best on a held-out part of the training split.
    result = evaluation.linear_probe(train, train_y, test, test_y, weight_decays=(1e-4, 1e-1, 10.0))
    assert set(result.holdout_accuracies) == {1e-4, 1e-1, 10.0}
    assert result.holdout_accuracies[result.weight_decay] == max(result.holdout_accuracies.values())


def test_heldout_report_by_hand(tmp_path):
    outputs = np.array(
        [[0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.2, 0.3, 0.5], [0.6, 0.3, 0.1], [0.3, 0.4, 0.3]], dtype="float32"
    )
    labels = np.array([0, 1, 2, 1, 0])
    report = evaluation.heldout_report(outputs, labels, class_names=["a", "b", "c"])
    assert report["top1"] == pytest.approx(3 / 5)
    assert report["top5"] == 1.0  # k = min(5, 3 classes)
    assert report["per_class"] == {"a": 0.5, "b": 0.5, "c": 1.0}
    assert report["confusion"] == [[1, 1, 0], [1, 1, 0], [0, 0, 1]]
    # ECE: confidences 0.7, 0.8, 0.5, 0.6, 0.4 in five of the 15 bins, right in the first three.
    expected = (abs(1 - 0.7) + abs(1 - 0.8) + abs(1 - 0.5) + abs(0 - 0.6) + abs(0 - 0.4)) / 5
    assert report["ece"] == pytest.approx(expected, abs=1e-6)
    # Logits give the same report as their softmax.
    assert evaluation.heldout_report(np.log(outputs), labels)["ece"] == pytest.approx(report["ece"], abs=1e-6)
    assert evaluation.top_k_accuracy(outputs, labels, 2) == 1.0
    assert evaluation.top_k_accuracy(np.array([[0.5, 0.3, 0.2]]), np.array([2]), 2) == 0.0
    evaluation.plot_confusion(report, str(tmp_path / "confusion.png"))
    assert (tmp_path / "confusion.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match=r"\[7\]"):  # names the label outside the classes
        evaluation.heldout_report(np.eye(3)[[0, 1, 2]], np.array([0, 7, 2]))
    # Confidence 0.75 in every row, right in 3 of 4: calibrated.
    calibrated = np.tile([[0.75, 0.25]], (4, 1))
    assert evaluation.expected_calibration_error(calibrated, np.array([0, 0, 0, 1])) == pytest.approx(0.0)


def test_too_few_images_nan_features_and_empty_splits_are_refused():
    train, train_y = _clusters(3, 6, 5)
    # An int shot count; class 2 keeps 4 images, fewer than 5 shots: the error names the class.
    assert list(evaluation.fewshot(train, train_y, train, train_y, shots=np.int64(2))) == [2]
    with pytest.raises(ValueError, match="'two'"):
        evaluation.fewshot(train[:-2], train_y[:-2], train, train_y, shots=5, class_names=["zero", "one", "two"])
    broken = train.copy()
    broken[3, 1] = np.nan
    with pytest.raises(ValueError, match="image 3"):
        evaluation.fewshot(broken, train_y, train, train_y, shots=(1,))
    with pytest.raises(ValueError, match="test features"):
        evaluation.knn_accuracy(train, train_y, broken, train_y)
    with pytest.raises(ValueError, match=r"\(0, 5\)"):
        evaluation.linear_probe(train, train_y, np.zeros((0, 5)), np.zeros(0, dtype=int))


@pytest.mark.parametrize(
    "evaluate",
    [
        lambda *splits, **kwargs: evaluation.fewshot(*splits, shots=2, **kwargs),
        lambda *splits, **kwargs: evaluation.linear_probe(*splits, weight_decays=1e-3, **kwargs),
        lambda *splits, **kwargs: evaluation.knn_accuracy(*splits, k=3, **kwargs),
    ],
    ids=["fewshot", "linear_probe", "knn_accuracy"],
)
def test_labels_the_classes_cannot_hold_and_mismatched_features_are_refused(evaluate):
    train, train_y = _clusters(3, 6, 5)
    # Else: a negative label read as the last class, an IndexError deep inside, a broadcasting error.
    with pytest.raises(ValueError, match="-1"):
        evaluate(train, train_y - 1, train, train_y)
    with pytest.raises(ValueError, match="num_classes=3"):
        evaluate(train, train_y, train, train_y, num_classes=2)
    with pytest.raises(ValueError, match="5 vs 4"):
        evaluate(train, train_y, train[:, :4], train_y)
    # NumPy integers are counts like Python's.
    evaluate(train, train_y, train, train_y, num_classes=np.int64(3))
