"""Shared fixtures: a fixed seed and the float32 policy restored for every test."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _isolated_keras_state():
    keras.utils.set_random_seed(0)
    yield
    keras.config.set_dtype_policy("float32")
    keras.backend.clear_session()


def pytest_configure(config):
    # The per-test time limit (tests/budget.py); under xdist the controller sees every report.
    if not hasattr(config, "workerinput"):
        from budget import from_environment

        config.pluginmanager.register(from_environment(), "keras_vit_budget")
