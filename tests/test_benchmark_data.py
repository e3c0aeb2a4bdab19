"""The data benchmark's parts on a small folder (the real run indexes 100,000 files)."""

import json

import pytest

from tests.helpers import BACKEND

pytestmark = pytest.mark.skipif(BACKEND != "tensorflow", reason="tf.data and file listing: one backend is enough")


def test_data_benchmark_indexes_and_streams_a_generated_folder(tmp_path):
    from benchmarks import data as bench

    root = str(tmp_path / "folder")
    bench.write_folder(root, 300, num_classes=3, num_distinct=4)
    timings = bench.time_indexing(root, repeats=1)
    assert set(timings) == {"keras_vit", "keras"} and all(t > 0 for t in timings.values())
    speed = bench.pipeline_images_per_second(root, image_size=32, batch_size=8, batches=2)
    assert speed > 0
    result = {
        "files": 300,
        "repeats": 1,
        "indexing_seconds": timings,
        "image_size": 32,
        "pipeline_images_per_second": speed,
        "model_images_per_second": {"ViTB16": speed / 10},
        "model_batch_size": 8,
        "backend": BACKEND,
    }
    table = bench.format_table(json.loads(json.dumps(result)))
    assert "| ViTB16 |" in table and "10x |" in table


def test_data_benchmark_rejects_non_positive_options(capsys):
    from benchmarks import data as bench

    with pytest.raises(SystemExit):
        bench.main(["--files", "0"])
    assert "--files must be positive" in capsys.readouterr().err
