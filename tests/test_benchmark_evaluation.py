"""The evaluation benchmark's parts at toy sizes (the real run solves 1,000 x 25 x 768 and streams 16,000 images)."""

import pytest

from tests.helpers import BACKEND

pytestmark = pytest.mark.skipif(BACKEND != "tensorflow", reason="NumPy and tf.data: one backend is enough")


def test_evaluation_benchmark_times_the_ridge_and_measures_streaming():
    from benchmarks import evaluation as bench

    ridge = bench.time_ridge(num_classes=20, shots=5, dim=16, repeats=1, extra_l2=2)
    assert ridge["solve_seconds"] > 0 and ridge["per_extra_l2_seconds"] > 0
    row = bench.measure_extraction("small", 40, 16)
    assert row["images"] == 40 and row["feature_mib"] == pytest.approx(40 * 64 * 4 / 2**20)
    assert row["peak_rss_mib"] > 0 and row["images_per_second"] > 0
    table = bench.format_table({"ridge": ridge, "repeats": 1, "extraction": [row], "backend": BACKEND})
    assert "| small | 40 |" in table and "median of 1" in table


def test_evaluation_benchmark_rejects_bad_counts(capsys):
    from benchmarks import evaluation as bench

    with pytest.raises(SystemExit):
        bench.main(["--small-images", "10,-1"])
    assert "image counts must be positive" in capsys.readouterr().err
