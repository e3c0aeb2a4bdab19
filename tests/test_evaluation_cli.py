"""`keras-vit evaluate`: the table and the files, one-line errors, and a trained model beating its random init."""

import json
import os

import keras
import numpy as np
import pytest

import keras_vit
import keras_vit_cli as cli
from keras_vit import evaluation
from keras_vit.training import finetune

TINY = dict(patch_size=4, hidden_dim=16, num_layers=1, num_heads=2, mlp_dim=32, input_shape=(16, 16, 3))


@pytest.fixture(scope="module")
def saved_model(tmp_path_factory):
    """A tiny digits classifier with class names, saved as `keras-vit finetune` saves its model."""
    model = keras_vit.VisionTransformer(**TINY, classes=10, classifier_activation=None)
    model = keras_vit.models.metadata.with_class_names(model, [str(digit) for digit in range(10)])
    path = str(tmp_path_factory.mktemp("model") / "model.keras")
    model.save(path)
    return path


def test_evaluate_prints_one_table_and_writes_its_files(saved_model, tmp_path, capsys):
    out = str(tmp_path / "out")
    assert cli.main(["evaluate", saved_model, "--shots", "1,5", "--seeds", "2", "--out", out]) == 0
    printed = capsys.readouterr().out
    rows = ("1-shot linear", "5-shot linear", "linear probe", "k-NN (k=20)", "head top-1", "head top-5")
    assert all(row in printed for row in rows)
    assert "\r" not in printed and "\x1b" not in printed  # not a terminal: no progress bars
    assert sorted(os.listdir(out)) == ["confusion_matrix.png", "fewshot.png", "metrics.json"]
    with open(os.path.join(out, "metrics.json")) as file:
        metrics = json.load(file)
    assert set(metrics["fewshot"]) == {"1", "5"} and len(metrics["fewshot"]["5"]["accuracies"]) == 2
    assert metrics["train_examples"] == 1437 and metrics["test_examples"] == 360  # finetune's digits split
    assert metrics["representation"] == "token" and metrics["feature_dim"] == 16
    assert list(metrics["heldout"]["per_class"]) == [str(digit) for digit in range(10)]
    for name in ("fewshot.png", "confusion_matrix.png"):
        with open(os.path.join(out, name), "rb") as file:
            assert file.read(4) == b"\x89PNG"
    # The same folder, results without a head: the earlier confusion matrix is not left to pass for this set's.
    metrics.pop("heldout")
    evaluation.write_results(metrics, out)
    assert sorted(os.listdir(out)) == ["fewshot.png", "metrics.json"]


@pytest.mark.skipif(keras.backend.backend() != "jax", reason="the command's plumbing: the models' backends are tested")
def test_evaluate_takes_a_rope_model_with_registers(tmp_path):
    # DINOv3's position scheme (four registers, RoPE, no position table), saved as `keras-vit finetune` saves one.
    rope = dict(rope_type="dinov3", temperature=100.0, rotate_half=True)
    options = dict(num_register_tokens=4, position_embedding=False, rope=rope)
    model = keras_vit.VisionTransformer(**TINY, classes=10, classifier_activation=None, **options)
    model = keras_vit.models.metadata.with_class_names(model, [str(digit) for digit in range(10)])
    model.save(tmp_path / "rope.keras")
    out = str(tmp_path / "out")
    argv = ["evaluate", str(tmp_path / "rope.keras"), "--shots", "5", "--seeds", "1", "--out", out, "--verbose", "0"]
    assert cli.main(argv) == 0
    with open(os.path.join(out, "metrics.json")) as file:
        metrics = json.load(file)
    assert metrics["representation"] == "token" and metrics["feature_dim"] == 16
    assert metrics["heldout"]["examples"] == 360 and metrics["knn"]["accuracy"] > 0.2
    # The reloaded model's results are the built one's (k-NN and few-shot read the same features).
    train, test = finetune.digits_sources()
    expected = evaluation.evaluate(model, train, test, shots=(5,), seeds=1, verbose=0)
    assert metrics["knn"]["accuracy"] == pytest.approx(expected["knn"]["accuracy"], abs=1e-9)
    assert metrics["fewshot"]["5"]["mean"] == pytest.approx(expected["fewshot"]["5"]["mean"], abs=1e-9)


@pytest.mark.parametrize(
    "extra, message", [(["--shots", "500"], "500"), (["--shots", "1,x"], "--shots"), (["--k", "0"], "k")]
)
def test_bad_input_is_one_line(saved_model, tmp_path, capsys, extra, message):
    assert cli.main(["evaluate", saved_model, "--out", str(tmp_path), "--verbose", "0", *extra]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and "Traceback" not in err
    assert not os.path.exists(tmp_path / "metrics.json")


def test_an_unreadable_split_or_a_plain_model_is_one_line(saved_model, tmp_path, capsys, monkeypatch):
    from PIL import Image

    for name in ("a", "b"):
        os.makedirs(tmp_path / "images" / "train" / name)
        os.makedirs(tmp_path / "images" / "test" / name)
        Image.fromarray(np.zeros((16, 16, 3), "uint8")).save(tmp_path / "images" / "train" / name / "0.png")
        (tmp_path / "images" / "test" / name / "0.jpg").write_text("not an image")

    def extracted(*args, **kwargs):
        raise AssertionError("a split was extracted before the unreadable one was found")

    monkeypatch.setattr(evaluation.extraction, "_stream", extracted)
    argv = ["evaluate", saved_model, "--data", str(tmp_path / "images"), "--out", str(tmp_path / "out")]
    assert cli.main([*argv, "--verbose", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "No readable images under" in err and "test" in err
    assert not os.path.exists(tmp_path / "out" / "metrics.json")
    # A model without a ViT.
    plain = str(tmp_path / "plain.keras")
    keras.Sequential([keras.Input((16, 16, 3)), keras.layers.Flatten(), keras.layers.Dense(10)]).save(plain)
    assert cli.main(["evaluate", plain, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "holds no keras_vit Vision Transformer" in err


@pytest.mark.skipif(keras.backend.backend() != "jax", reason="trains a model: one backend is enough")
def test_a_trained_model_beats_its_random_init_at_ten_shots(tmp_path):
    keras.utils.set_random_seed(0)
    train, test = finetune.digits_sources()
    model = keras_vit.VisionTransformer(**TINY, classes=10, classifier_activation=None)
    random_init = keras_vit.VisionTransformer.from_config(model.get_config())
    images, labels = zip(*train[0].as_numpy_iterator())
    pixels = keras.ops.convert_to_numpy(keras.ops.image.resize(np.stack(images).astype("float32"), (16, 16)))
    model.compile(keras.optimizers.AdamW(2e-3), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(pixels, np.array(labels), batch_size=64, epochs=7, verbose=0)  # 7 x 23 = 161 steps
    settings = dict(shots=(10,), seeds=3, weight_decays=1e-4, verbose=0)
    trained = evaluation.evaluate(model, train, test, **settings)["fewshot"]["10"]["mean"]
    baseline = evaluation.evaluate(random_init, train, test, **settings)["fewshot"]["10"]["mean"]
    assert trained > baseline + 0.2, (trained, baseline)
