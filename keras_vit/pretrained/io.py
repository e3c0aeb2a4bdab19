"""Reading and writing checkpoint files as dicts of NumPy arrays, safely.

Two containers are read: NumPy `.npz` (the official JAX checkpoints), with
`numpy.load(allow_pickle=False)`, and safetensors (timm and Hugging Face),
with the `safetensors` library, which validates its own header. Nothing is
ever unpickled. The one check left to do here is the one neither library
does: each `.npz` member's declared shape and dtype are compared with its
size in the archive before anything is decompressed (a small archive cannot
declare a huge member). PyTorch `.pth`/`.bin` pickles and Keras saves are
recognised by their bytes and refused with a message that says what to do.

Writes go through `keras_vit.utils.files`, so a crash never leaves a
half-written checkpoint behind.
"""

import json
import os
import struct
import zipfile
import zlib

import numpy as np

from keras_vit.pretrained.errors import CheckpointError, malformed
from keras_vit.utils import extras, files

# safetensors dtype names -> the NumPy dtype read (bfloat16 widened to float32: exact, it is float32's top half).
_SAFETENSORS_DTYPES = {
    "F64": "float64",
    "F32": "float32",
    "F16": "float16",
    "BF16": "float32",
    "I64": "int64",
    "I32": "int32",
    "I16": "int16",
    "I8": "int8",
    "U8": "uint8",
    "BOOL": "bool",
}
_MAX_HEADER = 100 * 1024 * 1024
_ZIP_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, OSError)
_PICKLE_HINT = (
    "PyTorch .pth/.pt/.bin checkpoints are pickles, and unpickling can run arbitrary code, so "
    "keras_vit refuses them. Use the safetensors file of the same checkpoint (the Hub repos of "
    "timm/ and google/ ViTs have one: model.safetensors), or convert it yourself in a trusted "
    "environment: `safetensors.torch.save_file(torch.load(path, weights_only=True), "
    "'model.safetensors')`."
)
_DAMAGED = "Delete it and download it again."


def detect_container(path):
    """Returns `"npz"` or `"safetensors"` for a file, from its bytes (not its name).

    Raises:
        CheckpointError: pickles, Keras `.keras`/`.h5` files and anything
            unknown, with what to do instead.
    """
    with open(path, "rb") as handle:
        head = handle.read(16)
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        try:
            with zipfile.ZipFile(path) as archive:
                names = archive.namelist()
        except zipfile.BadZipFile as error:
            raise CheckpointError(f"{path} is a damaged zip archive (.npz): {error}. {_DAMAGED}") from error
        if any(name.endswith("data.pkl") for name in names):
            raise CheckpointError(f"{path} is a PyTorch zip checkpoint. {_PICKLE_HINT}")
        if "model.weights.h5" in names and "config.json" in names:
            raise CheckpointError(
                f"{path} is a Keras .keras save (a whole model), not a checkpoint. Load it with "
                f"`keras.saving.load_model({path!r})`, or convert its weights for `weights=` with "
                f"`keras-vit convert {path} weights.npz` (then `weights='weights.npz'`)."
            )
        return "npz"
    # Safetensors (an 8-byte header length, then a JSON object) before the pickle test: a length can start with 0x80.
    if len(head) >= 9 and 0 < struct.unpack("<Q", head[:8])[0] < _MAX_HEADER and head[8:9] == b"{":
        return "safetensors"
    if head[:1] == b"\x80" or path.endswith((".pth", ".pt", ".bin", ".pkl", ".pickle", ".ckpt")):
        raise CheckpointError(f"{path} is a pickle (PyTorch-style) file. {_PICKLE_HINT}")
    if head.startswith(b"\x89HDF"):
        raise CheckpointError(
            f"{path} is an HDF5 file (a Keras .h5/.weights.h5 save?). Load Keras saves with "
            "`keras.saving.load_model` or `model.load_weights`; `weights=` takes published "
            "checkpoints (.npz, .safetensors)."
        )
    raise CheckpointError(
        f"{path} is neither a NumPy .npz nor a safetensors file (first bytes: {head[:8]!r}). "
        "keras_vit reads official .npz checkpoints and timm / Hugging Face safetensors."
    )


class DeclaredTensor:
    """A tensor as the file declares it (name, shape, dtype), read only when used.

    `np.asarray(tensor)` reads the bytes. A converter that refuses a
    checkpoint for an unexpected name therefore never reads (or inflates)
    that tensor.

    Attributes:
        name: the name in the file.
        shape: tuple of ints.
        dtype: the NumPy dtype `np.asarray` returns (bfloat16 widened to float32).
    """

    def __init__(self, name, shape, dtype, read):
        self.name, self.shape, self.dtype, self._read = name, tuple(shape), np.dtype(dtype), read

    @property
    def ndim(self):
        return len(self.shape)

    def __array__(self, dtype=None, copy=None):
        array = self._read()
        return array if dtype is None else array.astype(dtype)

    def __repr__(self):
        return f"DeclaredTensor({self.name!r}, shape={self.shape}, dtype={self.dtype})"


def read_safetensors(path, with_metadata=False, lazy=False):
    """Reads a safetensors file into `{name: np.ndarray}` with the `safetensors` library.

    Args:
        path: the file.
        with_metadata: also return the header's `__metadata__` dict.
        lazy: return `DeclaredTensor`s, read when converted to arrays.

    Returns:
        The dict (and the metadata dict).

    Raises:
        CheckpointError: the library refuses the file (a malformed header,
            byte ranges that do not tile the file, an unknown dtype).
    """
    extras.check("safetensors", needed_for="reading a .safetensors checkpoint")
    import ml_dtypes  # noqa: F401 (a Keras dependency: registers bfloat16 with NumPy for safetensors' reader)
    from safetensors import SafetensorError, safe_open

    path = os.fspath(path)
    try:
        with safe_open(path, framework="numpy") as handle:
            metadata = handle.metadata() or {}
            declared = {name: handle.get_slice(name) for name in handle.keys()}
            declared = {name: (entry.get_shape(), entry.get_dtype()) for name, entry in declared.items()}
    except SafetensorError as error:
        raise CheckpointError(f"{path} is not a valid safetensors file ({error}). {_DAMAGED}") from error
    for name, (_, dtype) in declared.items():
        if dtype not in _SAFETENSORS_DTYPES:
            raise malformed(
                path, f"tensor {name!r}", f"has the dtype {dtype}, not one of {sorted(_SAFETENSORS_DTYPES)}"
            )

    def reader(name):
        def read():
            try:
                with safe_open(path, framework="numpy") as handle:
                    array = handle.get_tensor(name)  # an owned, writeable copy already
            except SafetensorError as error:
                raise CheckpointError(f"{path}: cannot read tensor {name!r}: {error}") from error
            return array.astype(np.float32) if array.dtype == ml_dtypes.bfloat16 else array

        return read

    tensors = {
        name: DeclaredTensor(name, shape, _SAFETENSORS_DTYPES[dtype], reader(name))
        for name, (shape, dtype) in declared.items()
    }
    if not lazy:
        tensors = {name: np.asarray(tensor) for name, tensor in tensors.items()}
    return (tensors, metadata) if with_metadata else tensors


def _npz_declarations(path):
    """`{name: (shape, dtype)}` of every member, each `.npy` header checked against the member's size in the
    archive (decompressing only the headers): the zip-bomb check `numpy.load` does not make."""
    declared = {}
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            field = f"member {info.filename!r}"
            if not info.filename.endswith(".npy") or info.is_dir():
                raise malformed(path, field, "is not a .npy array (an .npz holds only .npy members)")
            try:
                with archive.open(info) as member:
                    version = np.lib.format.read_magic(member)
                    if version == (1, 0):
                        shape, _, dtype = np.lib.format.read_array_header_1_0(member)
                    else:
                        shape, _, dtype = np.lib.format.read_array_header_2_0(member)
                    header_length = member.tell()
            except (ValueError, SyntaxError, *_ZIP_ERRORS) as error:
                raise malformed(path, f"{field} header", f"cannot be read ({error})") from error
            if dtype.hasobject:
                raise CheckpointError(f"{path}: {field} holds pickled Python objects, which keras_vit never loads.")
            needed = header_length + int(np.prod(shape, dtype=object)) * dtype.itemsize
            if needed != info.file_size:
                raise malformed(
                    path,
                    f"{field} size",
                    f"is {info.file_size} bytes in the archive directory but its header declares {dtype} {shape} "
                    f"({needed} bytes)",
                )
            declared[info.filename[: -len(".npy")]] = (shape, dtype)
    return declared


def read_npz(path, lazy=False):
    """Reads an `.npz` into `{name: np.ndarray}` with `numpy.load(allow_pickle=False)`.

    Every member's `.npy` header is checked against its declared size before
    any array data is decompressed, so a small archive declaring a huge or
    unexpected member is refused without inflating it.

    Args:
        path: the file.
        lazy: return `DeclaredTensor`s, decompressed when converted to arrays.

    Raises:
        CheckpointError: a member that is not a consistent `.npy`, pickled
            objects, or a damaged archive (bad CRC, truncated member).
    """
    path = os.fspath(path)
    try:
        declared = _npz_declarations(path)
    except _ZIP_ERRORS as error:
        raise CheckpointError(f"{path} is a damaged .npz ({type(error).__name__}: {error}). {_DAMAGED}") from error

    def reader(name):
        def read():
            try:
                with np.load(path, allow_pickle=False) as archive:
                    return archive[name]
            except (ValueError, *_ZIP_ERRORS) as error:
                raise CheckpointError(f"{path}: member {name!r} is damaged ({error}). {_DAMAGED}") from error

        return read

    tensors = {name: DeclaredTensor(name, shape, dtype, reader(name)) for name, (shape, dtype) in declared.items()}
    return tensors if lazy else {name: np.asarray(tensor) for name, tensor in tensors.items()}


def read_checkpoint(path, lazy=False):
    """Reads a checkpoint file into `(tensors, metadata)`.

    Args:
        path: an `.npz` or safetensors file, or a directory holding
            `model.safetensors` (a `save_pretrained` folder).
        lazy: return `DeclaredTensor`s (every declaration checked, no data
            read yet) instead of arrays.

    Returns:
        `(dict of np.ndarray, dict)`: the tensors, and metadata (safetensors
        `__metadata__` plus a neighbouring `config.json`, if any, under
        `"config"`).
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        candidate = os.path.join(path, "model.safetensors")
        if not os.path.isfile(candidate):
            raise CheckpointError(
                f"{path} is a directory without model.safetensors. Pass the checkpoint file itself "
                f"(found: {sorted(os.listdir(path))[:10]})."
            )
        path = candidate
    if not os.path.isfile(path):
        raise FileNotFoundError(f"No checkpoint file at {path}.")
    container = detect_container(path)
    if container == "npz":
        tensors, metadata = read_npz(path, lazy=lazy), {}
    else:
        tensors, metadata = read_safetensors(path, with_metadata=True, lazy=lazy)
        metadata = dict(metadata)
    config_path = os.path.join(os.path.dirname(path), "config.json")
    if container == "safetensors" and os.path.isfile(config_path):
        try:
            with open(config_path) as handle:
                metadata["config"] = json.load(handle)
        except (OSError, json.JSONDecodeError):
            pass  # A broken neighbouring config only loses a hint, never weights.
    if not tensors:
        raise CheckpointError(f"{path} holds no tensors.")
    return tensors, metadata


def write_safetensors(path, tensors, metadata=None, replace=True):
    """Writes `{name: array}` as safetensors, atomically (`keras_vit.utils.files`; `replace=False`: never over a
    file)."""
    extras.check("safetensors", needed_for="writing a .safetensors checkpoint")
    from safetensors.numpy import save_file

    tensors = {name: np.ascontiguousarray(value) for name, value in tensors.items()}
    metadata = {str(key): str(value) for key, value in (metadata or {}).items()}
    with files.atomic_file(path, replace=replace) as staged:
        save_file(tensors, staged, metadata=metadata)
    return os.fspath(path)


def write_npz(path, tensors, replace=True):
    """Writes `{name: array}` as an uncompressed `.npz`, atomically (`replace=False`: never over a file)."""
    with files.atomic_file(path, replace=replace) as staged:
        with open(staged, "wb") as handle:
            np.savez(handle, **tensors)
    return os.fspath(path)
