"""Reading and writing checkpoint files as dicts of NumPy arrays.

`.npz` files are read with `numpy.load(allow_pickle=False)` and safetensors with the `safetensors` library. The one
check added here: each `.npz` member's declared size is compared with the archive's before it is decompressed.
"""

import json
import os
import struct
import zipfile
import zlib

import numpy as np

from keras_vit.pretrained.errors import CheckpointError
from keras_vit.utils import extras, files

_ZIP_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, OSError)
_DAMAGED = "Delete it and download it again."
_PICKLE_HINT = (
    "Unpickling can run arbitrary code, so keras_vit refuses pickles. Use the checkpoint's model.safetensors "
    "(timm/ and google/ Hub repos have one), or convert it in a trusted environment: "
    "`safetensors.torch.save_file(torch.load(path, weights_only=True), 'model.safetensors')`."
)


def detect_container(path):
    """Returns `"npz"` or `"safetensors"` from a file's first bytes; refuses pickles and HDF5 files."""
    with open(path, "rb") as handle:
        head = handle.read(16)
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return "npz"
    # An 8-byte header length, then a JSON object; tested before pickles (a length can start with 0x80).
    if len(head) >= 9 and 0 < struct.unpack("<Q", head[:8])[0] < 100 << 20 and head[8:9] == b"{":
        return "safetensors"
    if head[:1] == b"\x80" or path.endswith((".pth", ".pt", ".bin", ".pkl", ".pickle", ".ckpt")):
        raise CheckpointError(f"{path} is a pickle (PyTorch-style) file. {_PICKLE_HINT}")
    if head.startswith(b"\x89HDF"):
        raise CheckpointError(
            f"{path} is an HDF5 file (a Keras save?): load it with `keras.saving.load_model` or `model.load_weights`."
        )
    raise CheckpointError(
        f"{path} is neither a NumPy .npz nor a safetensors file (first bytes: {head[:8]!r}). "
        "keras_vit reads official .npz checkpoints and timm / Hugging Face safetensors."
    )


def read_safetensors(path):
    """Reads a safetensors file into `({name: np.ndarray}, metadata)`; bfloat16 becomes float32."""
    extras.check("safetensors", needed_for="reading a .safetensors checkpoint")
    import ml_dtypes  # a Keras dependency: registers bfloat16 with NumPy for safetensors' reader
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(path, framework="numpy") as handle:
            metadata = handle.metadata() or {}
            tensors = {name: handle.get_tensor(name) for name in handle.keys()}
    except (SafetensorError, TypeError, ValueError) as error:
        raise CheckpointError(f"{path} is not a valid safetensors file ({error}). {_DAMAGED}") from error
    for name, array in tensors.items():
        if array.dtype == ml_dtypes.bfloat16:
            tensors[name] = array.astype(np.float32)
    return tensors, metadata


class NpzMember:
    """An `.npz` member as its header declares it: `shape` now, the values when `np.asarray` asks."""

    def __init__(self, path, name, shape):
        self.path, self.name, self.shape = path, name, shape

    def __array__(self, dtype=None, copy=None):
        try:
            with np.load(self.path, allow_pickle=False) as archive:
                array = archive[self.name]
        except (ValueError, *_ZIP_ERRORS) as error:
            raise CheckpointError(f"{self.path}: member {self.name!r} is damaged ({error}). {_DAMAGED}") from error
        return array if dtype is None else array.astype(dtype)


def _refuse_other_zips(path, names):
    if any(name.endswith("data.pkl") for name in names):
        raise CheckpointError(f"{path} is a PyTorch zip checkpoint. {_PICKLE_HINT}")
    if "model.weights.h5" in names and "config.json" in names:
        raise CheckpointError(
            f"{path} is a .keras save (a whole model): load it with `keras.saving.load_model`, or "
            f"`keras-vit convert {path} weights.npz` for `weights='weights.npz'`."
        )


def _read_npy_header(archive, info):
    with archive.open(info) as member:
        version = np.lib.format.read_magic(member)
        read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, _, dtype = read_header(member)
        return shape, dtype, member.tell()


def read_npz(path):
    """Reads an `.npz` into `{name: NpzMember}`, every member's header checked against its size first."""
    members = {}
    try:
        with zipfile.ZipFile(path) as archive:
            _refuse_other_zips(path, archive.namelist())
            for info in archive.infolist():
                field = f"member {info.filename!r}"
                if not info.filename.endswith(".npy"):
                    raise CheckpointError(f"{path}: {field} is not a .npy array (an .npz holds only .npy members).")
                try:
                    shape, dtype, header_length = _read_npy_header(archive, info)
                except (ValueError, SyntaxError) as error:
                    raise CheckpointError(f"{path}: the header of {field} cannot be read ({error}).") from error
                if dtype.hasobject:
                    raise CheckpointError(f"{path}: {field} holds pickled Python objects, which keras_vit never loads.")
                needed = header_length + int(np.prod(shape, dtype=object)) * dtype.itemsize
                if needed != info.file_size:
                    raise CheckpointError(
                        f"{path}: {field} size is {info.file_size} bytes in the archive directory but its header "
                        f"declares {dtype} {shape} ({needed} bytes). The file is damaged."
                    )
                name = info.filename[: -len(".npy")]
                members[name] = NpzMember(path, name, shape)
    except _ZIP_ERRORS as error:
        raise CheckpointError(f"{path} is a damaged .npz ({type(error).__name__}: {error}). {_DAMAGED}") from error
    return members


def json_beside(path, name):
    """The JSON object `name` in the folder of `path` (a checkpoint file or folder), or `{}`."""
    folder = path if os.path.isdir(path) else os.path.dirname(path)
    try:
        with open(os.path.join(folder, name)) as handle:
            config = json.load(handle)
    except (OSError, ValueError):
        return {}
    return config if isinstance(config, dict) else {}


def read_checkpoint(path):
    """Reads an `.npz` or safetensors file, or a folder with `model.safetensors`, into `(tensors, metadata)`.

    The metadata is safetensors' `__metadata__`, with a neighbouring `config.json` under `"config"`.
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        candidate = os.path.join(path, "model.safetensors")
        if not os.path.isfile(candidate):
            raise CheckpointError(f"{path} is a folder without model.safetensors: pass the checkpoint file itself.")
        path = candidate
    if not os.path.isfile(path):
        raise FileNotFoundError(f"No checkpoint file at {path}.")
    metadata = {}
    if detect_container(path) == "npz":
        tensors = read_npz(path)
    else:
        tensors, metadata = read_safetensors(path)
        # No (or a broken) neighbouring config only loses a hint, never weights.
        metadata["config"] = json_beside(path, "config.json")
    if not tensors:
        raise CheckpointError(f"{path} holds no tensors.")
    return tensors, metadata


def write_safetensors(path, tensors, metadata=None, replace=True):
    """Writes `{name: array}` as safetensors, atomically (`replace=False`: never over a file)."""
    extras.check("safetensors", needed_for="writing a .safetensors checkpoint")
    from safetensors.numpy import save_file

    tensors = {name: np.ascontiguousarray(value) for name, value in tensors.items()}
    metadata = {str(key): str(value) for key, value in (metadata or {}).items()}
    with files.atomic_file(path, replace=replace) as staged:
        save_file(tensors, staged, metadata=metadata)
    return os.fspath(path)


def write_npz(path, tensors, replace=True):
    """Writes `{name: array}` as an uncompressed `.npz`, atomically (`replace=False`: never over a file)."""
    with files.atomic_file(path, replace=replace) as staged, open(staged, "wb") as handle:
        np.savez(handle, **tensors)
    return os.fspath(path)
