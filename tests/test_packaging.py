"""The distribution: the sdist and the wheel build offline (as `python -m build` does: the wheel from the unpacked
sdist), the wheel installs into a fresh virtual environment and runs from there; an install with the torch extra
holds everything `import keras_vit` needs."""

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile

import pytest

from tests.helpers import BACKEND, REPO_ROOT

IGNORED = shutil.ignore_patterns(
    ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", "outputs", ".pytest_cache", ".ipynb_checkpoints"
)
NAME = "keras_vision_transformer-0.1.0"
# The PEP 517 hooks `python -m build` calls, here without an isolated environment (offline).
BUILD = "import sys; from setuptools import build_meta; getattr(build_meta, sys.argv[1])(sys.argv[2])"


def _run(command, **kwargs):
    result = subprocess.run(command, capture_output=True, text=True, check=False, **kwargs)
    assert result.returncode == 0, f"{command}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result.stdout


@pytest.mark.skipif(BACKEND != "tensorflow", reason="the distribution is built once, on the tensorflow run")
def test_sdist_and_wheel_build_offline_and_the_wheel_installs_and_runs(tmp_path):
    source = shutil.copytree(REPO_ROOT, tmp_path / "source", ignore=IGNORED, symlinks=True)
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    environment["PIP_CONFIG_FILE"] = os.devnull  # --no-index: no machine-wide index settings apply
    _run([sys.executable, "-c", BUILD, "build_sdist", str(tmp_path / "dist")], cwd=source, env=environment)
    with tarfile.open(tmp_path / "dist" / f"{NAME}.tar.gz") as sdist:
        names = sdist.getnames()
        sdist.extractall(tmp_path / "unpacked", filter="data")
    shipped = {name.split("/", 2)[1] for name in names if name.count("/") >= 1}
    assert {"LICENSE", "README.md", "pyproject.toml", "keras_vit", "keras_vit_cli"} <= shipped
    assert "tests" not in shipped

    unpacked = tmp_path / "unpacked" / NAME
    _run([sys.executable, "-c", BUILD, "build_wheel", str(tmp_path / "wheels")], cwd=unpacked, env=environment)
    (wheel,) = (tmp_path / "wheels").glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        metadata = archive.read(f"{NAME}.dist-info/METADATA").decode()
        assert f"{NAME}.dist-info/licenses/LICENSE" in archive.namelist()
        assert "keras_vit/resources/imagenet_class_index.json" in archive.namelist()
    assert "License-Expression: Apache-2.0" in metadata and "License-File: LICENSE" in metadata

    # A fresh venv of the base interpreter that also sees this environment's packages (after its own).
    _run([getattr(sys, "_base_executable", sys.executable), "-m", "venv", "--without-pip", str(tmp_path / "venv")])
    python = str(tmp_path / "venv" / "bin" / "python")
    site_packages = _run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"]).strip()
    with open(os.path.join(site_packages, "main_environment.pth"), "w") as file:
        # addsitedir: this environment's own .pth files count too (the nightly side venv's names its base venv).
        file.write(f"import site; site.addsitedir({sysconfig.get_path('purelib')!r})\n")
    _run(
        [python, "-m", "pip", "install", "--no-deps", "--no-index", "--ignore-installed", "-q", str(wheel)],
        env=environment,
    )
    # Outside the source tree, without PYTHONPATH: only the installed wheel can answer.
    where = _run(
        [python, "-c", "import keras_vit_cli, keras_vit.models; print(keras_vit_cli.__file__, keras_vit.__file__)"],
        cwd=tmp_path,
        env=dict(environment, KERAS_BACKEND="numpy"),
    )
    assert all(path.startswith(site_packages) for path in where.split()), where
    usage = _run([os.path.join(tmp_path, "venv", "bin", "keras-vit"), "--help"], cwd=tmp_path, env=environment)
    assert "finetune" in usage and "export" in usage


def _installed_with(distribution, extras):
    """The canonical names of every distribution that installing `distribution[extras]` installs, itself included."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    installed, pending = set(), [(distribution, tuple(extras))]
    while pending:
        name, wanted = pending.pop()
        if canonicalize_name(name) in installed:
            continue
        installed.add(canonicalize_name(name))
        for text in importlib.metadata.requires(name) or []:
            requirement = Requirement(text)
            if requirement.marker is None or any(requirement.marker.evaluate({"extra": e}) for e in wanted or ("",)):
                pending.append((requirement.name, tuple(requirement.extras)))
    return installed


# After Keras and its backend: what keras_vit itself adds (Keras imports jax, TensorFlow, SciPy... wherever installed).
IMPORTED_BY_KERAS_VIT = """
import json, sys
import keras
before = {name.split(".")[0] for name in sys.modules}
import keras_vit
print(json.dumps(sorted({name.split(".")[0] for name in sys.modules} - before)))
"""


@pytest.mark.skipif(BACKEND != "torch", reason="an install with torch: the torch run")
def test_import_keras_vit_needs_nothing_that_the_torch_extra_does_not_install():
    from packaging.utils import canonicalize_name

    output = _run(
        [sys.executable, "-c", IMPORTED_BY_KERAS_VIT], cwd=REPO_ROOT, env=dict(os.environ, KERAS_BACKEND="torch")
    )
    imported = json.loads(output.strip().splitlines()[-1])
    assert "keras_vit" in imported, imported
    installed = _installed_with("keras-vision-transformer", ["torch"])
    assert {"keras", "numpy", "torch"} <= installed, installed
    distributions = importlib.metadata.packages_distributions()
    outside = {
        module: distribution
        for module in imported
        for distribution in distributions.get(module, [])
        if canonicalize_name(distribution) not in installed
    }
    assert not outside, f"import keras_vit needs {outside}, which keras-vision-transformer[torch] does not install"
