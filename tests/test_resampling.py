"""Position-embedding resampling against scipy.ndimage.zoom (the official method) and torch's interpolate."""

import numpy as np
import pytest
import scipy.ndimage

from keras_vit.layers.resampling import resample_position_embedding

GRIDS = [((14, 14), (24, 24)), ((14, 14), (7, 7)), ((14, 14), (12, 20)), ((6, 9), (10, 4)), ((3, 5), (1, 7))]
METHODS = [("official", False), ("bilinear", False), ("bicubic", False), ("bilinear", True), ("bicubic", True)]


def _embedding(grid, dim=5, prefix=1, seed=0):
    return np.random.default_rng(seed).normal(size=(1, prefix + grid[0] * grid[1], dim)).astype("float32")


def reference(grid, target, method, antialias):
    """`grid` (height, width, channels; float64) resized by scipy (the official method) or by torch."""
    if method == "official":
        return scipy.ndimage.zoom(grid, (target[0] / grid.shape[0], target[1] / grid.shape[1], 1), order=1)
    torch = pytest.importorskip("torch")
    images = torch.from_numpy(grid).permute(2, 0, 1)[None]
    resized = torch.nn.functional.interpolate(images, target, mode=method, align_corners=False, antialias=antialias)
    return resized[0].permute(1, 2, 0).numpy()


@pytest.mark.parametrize("source, target", GRIDS)
@pytest.mark.parametrize("method, antialias", METHODS)
def test_resampling_matches_the_reference(source, target, method, antialias):
    embedding = _embedding(source, prefix=2)
    result = resample_position_embedding(
        embedding, source, target, num_prefix_tokens=2, method=method, antialias=antialias
    )
    assert result.shape == (1, 2 + target[0] * target[1], 5)
    assert result.dtype == np.float32
    expected = reference(embedding[0, 2:].reshape(source + (-1,)).astype("float64"), target, method, antialias)
    # float32 interpolation matrices (those the model uses) against float64 references: up to ~2e-6 apart on torch.
    np.testing.assert_allclose(result[0, 2:].reshape(target + (-1,)), expected, atol=1e-5)
    np.testing.assert_array_equal(result[:, :2], embedding[:, :2])  # the prefix tokens kept


@pytest.mark.parametrize("method", ["official", "bilinear", "bicubic"])
def test_same_size_is_identity(method):
    embedding = _embedding((5, 7))
    np.testing.assert_array_equal(resample_position_embedding(embedding, (5, 7), (5, 7), method=method), embedding)


def test_two_dimensional_input_and_no_prefix():
    embedding = _embedding((4, 4), prefix=0)[0]
    result = resample_position_embedding(embedding, (4, 4), (8, 8), num_prefix_tokens=0)
    assert result.shape == (64, 5)
    # Corners are aligned in the official method.
    np.testing.assert_allclose(result[0], embedding[0], atol=1e-6)
    np.testing.assert_allclose(result[-1], embedding[-1], atol=1e-6)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(source_grid=(14, 13), target_grid=(4, 4)), r"\(1, 197, 5\)"),
        (dict(source_grid=(14, 14), target_grid=(4, 4), method="nearest"), "method='nearest'"),
        (dict(source_grid=(14, 14), target_grid=(4, 4), antialias=True), "antialias"),
    ],
)
def test_bad_arguments_name_the_value(kwargs, message):
    with pytest.raises(ValueError, match=message):
        resample_position_embedding(_embedding((14, 14)), **kwargs)
