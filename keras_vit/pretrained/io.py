"""Reading and writing checkpoint files as dicts of NumPy arrays, safely.

Two containers are read: NumPy `.npz` (the official JAX checkpoints) and
safetensors (timm and Hugging Face). Nothing is ever unpickled:
`np.load(allow_pickle=False)`, and safetensors are parsed here with NumPy
(header, dtype table, byte ranges), which also lets bfloat16 files load as
float32 and makes every size inconsistency a `CorruptCheckpointError`.
PyTorch `.pth`/`.bin` pickles are recognised by their bytes and refused with
a message that says how to convert them.

Writes go to a temporary file in the destination folder and are renamed into
place, so a crash never leaves a half-written checkpoint behind.
"""

import json
import os
import struct
import tempfile
import zipfile
import zlib

import numpy as np

from keras_vit.pretrained.errors import CheckpointFormatError, CorruptCheckpointError

# safetensors dtype names -> NumPy little-endian dtypes. BF16 is widened below.
_SAFETENSORS_DTYPES = {
    "F64": "<f8",
    "F32": "<f4",
    "F16": "<f2",
    "BF16": "<u2",
    "I64": "<i8",
    "I32": "<i4",
    "I16": "<i2",
    "I8": "i1",
    "U8": "u1",
    "BOOL": "?",
}
_MAX_HEADER = 100 * 1024 * 1024
_PICKLE_HINT = (
    "PyTorch .pth/.pt/.bin checkpoints are pickles, and unpickling can run arbitrary code, so "
    "keras_vit refuses them. Use the safetensors file of the same checkpoint (the Hub repos of "
    "timm/ and google/ ViTs have one: model.safetensors), or convert it yourself in a trusted "
    "environment: `safetensors.torch.save_file(torch.load(path, weights_only=True), "
    "'model.safetensors')`."
)


def _sniff(path):
    with open(path, "rb") as handle:
        return handle.read(16)


def detect_container(path):
    """Returns `"npz"` or `"safetensors"` for a file, from its bytes (not its name).

    Raises:
        CheckpointFormatError: pickles, Keras `.h5` files and anything
            unknown, with what to do instead.
    """
    head = _sniff(path)
    if head.startswith(b"PK\x03\x04") or head.startswith(b"PK\x05\x06"):
        try:
            with zipfile.ZipFile(path) as archive:
                names = archive.namelist()
        except zipfile.BadZipFile as error:
            raise CorruptCheckpointError(
                f"{path} looks like a zip archive (.npz) but cannot be opened ({error}); it is "
                "probably truncated. Delete it and download it again."
            ) from error
        if any(name.endswith("data.pkl") for name in names):
            raise CheckpointFormatError(f"{path} is a PyTorch zip checkpoint. {_PICKLE_HINT}")
        return "npz"
    # Safetensors before the pickle test: a header length can start with 0x80.
    if len(head) >= 9:
        (header_size,) = struct.unpack("<Q", head[:8])
        if 0 < header_size < _MAX_HEADER and head[8:9] == b"{":
            return "safetensors"
    if head[:1] == b"\x80" or path.endswith((".pth", ".pt", ".bin", ".pkl", ".pickle", ".ckpt")):
        raise CheckpointFormatError(f"{path} is a pickle (PyTorch-style) file. {_PICKLE_HINT}")
    if head.startswith(b"\x89HDF"):
        raise CheckpointFormatError(
            f"{path} is an HDF5 file (a Keras .h5/.weights.h5 save?). Load Keras saves with "
            "`keras.saving.load_model` or `model.load_weights`; `weights=` takes published "
            "checkpoints (.npz, .safetensors)."
        )
    raise CheckpointFormatError(
        f"{path} is neither a NumPy .npz nor a safetensors file (first bytes: {head[:8]!r}). "
        "keras_vit reads official .npz checkpoints and timm / Hugging Face safetensors."
    )


def read_safetensors(path, with_metadata=False):
    """Reads a safetensors file into `{name: np.ndarray}` without unpickling.

    Args:
        path: the file.
        with_metadata: also return the header's `__metadata__` dict.

    Returns:
        The dict (and the metadata dict). bfloat16 tensors are returned as
        float32 (exact: bfloat16 is the top half of a float32).

    Raises:
        CorruptCheckpointError: malformed header or byte ranges that do not
            tile the file (a truncated download, for instance).
    """
    size = os.path.getsize(path)
    with open(path, "rb") as handle:
        raw = handle.read(8)
        if len(raw) < 8:
            raise CorruptCheckpointError(f"{path} is too short ({size} bytes) to be a safetensors file.")
        (header_size,) = struct.unpack("<Q", raw)
        if header_size > min(_MAX_HEADER, size - 8):
            raise CorruptCheckpointError(
                f"{path}: the safetensors header claims {header_size} bytes but the file has {size}; "
                "the file is truncated or not safetensors. Delete it and download it again."
            )
        try:
            header = json.loads(handle.read(header_size))
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise CorruptCheckpointError(f"{path}: unreadable safetensors header ({error}).") from error
        metadata = header.pop("__metadata__", None) or {}
        data_start = 8 + header_size
        ranges = []
        for name, spec in header.items():
            try:
                dtype, shape, (begin, end) = spec["dtype"], tuple(spec["shape"]), spec["data_offsets"]
            except (KeyError, TypeError, ValueError) as error:
                raise CorruptCheckpointError(f"{path}: malformed safetensors entry {name!r}: {spec!r}") from error
            if dtype not in _SAFETENSORS_DTYPES:
                raise CheckpointFormatError(f"{path}: tensor {name!r} has unsupported dtype {dtype}.")
            itemsize = np.dtype(_SAFETENSORS_DTYPES[dtype]).itemsize
            if end - begin != itemsize * int(np.prod(shape, dtype=np.int64)) or begin < 0:
                raise CorruptCheckpointError(
                    f"{path}: tensor {name!r} of shape {shape} and dtype {dtype} spans bytes "
                    f"[{begin}, {end}), which is the wrong size."
                )
            ranges.append((begin, end, name, dtype, shape))
        ranges.sort()
        expected_end = 0
        for begin, end, name, _, _ in ranges:
            if begin != expected_end:
                raise CorruptCheckpointError(f"{path}: tensor {name!r} does not start where the previous one ends.")
            expected_end = end
        if data_start + expected_end != size:
            raise CorruptCheckpointError(
                f"{path} should have {data_start + expected_end} bytes according to its header but has "
                f"{size}: it is truncated or padded. Delete it and download it again."
            )
        tensors = {}
        for begin, end, name, dtype, shape in ranges:
            handle.seek(data_start + begin)
            # A bytearray makes the array writeable without a second copy.
            array = np.frombuffer(bytearray(handle.read(end - begin)), dtype=_SAFETENSORS_DTYPES[dtype]).reshape(shape)
            if dtype == "BF16":
                array = (array.astype(np.uint32) << 16).view(np.float32)
            tensors[name] = array
    return (tensors, metadata) if with_metadata else tensors


def read_npz(path):
    """Reads an `.npz` into `{name: np.ndarray}` with `allow_pickle=False`.

    Raises:
        CorruptCheckpointError: a damaged archive (bad CRC, truncated member).
        CheckpointFormatError: pickled object arrays inside.
    """
    try:
        with np.load(path, allow_pickle=False) as archive:
            return {name: archive[name] for name in archive.files}
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as error:
        raise CorruptCheckpointError(
            f"{path} is a damaged .npz ({type(error).__name__}: {error}). Delete it and download it again."
        ) from error
    except ValueError as error:
        if "allow_pickle" in str(error):
            raise CheckpointFormatError(
                f"{path} contains pickled Python objects, which keras_vit never loads. {error}"
            ) from error
        raise CorruptCheckpointError(f"{path} is a damaged .npz: {error}") from error


def read_checkpoint(path):
    """Reads a checkpoint file into `(tensors, metadata)`.

    Args:
        path: an `.npz` or safetensors file, or a directory holding
            `model.safetensors` (a `save_pretrained` folder).

    Returns:
        `(dict of np.ndarray, dict)`: the tensors, and metadata (safetensors
        `__metadata__` plus a neighbouring `config.json`, if any, under
        `"config"`).
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        candidate = os.path.join(path, "model.safetensors")
        if not os.path.isfile(candidate):
            raise CheckpointFormatError(
                f"{path} is a directory without model.safetensors. Pass the checkpoint file itself "
                f"(found: {sorted(os.listdir(path))[:10]})."
            )
        path = candidate
    if not os.path.isfile(path):
        raise FileNotFoundError(f"No checkpoint file at {path}.")
    container = detect_container(path)
    if container == "npz":
        tensors, metadata = read_npz(path), {}
    else:
        tensors, metadata = read_safetensors(path, with_metadata=True)
        metadata = dict(metadata)
    config_path = os.path.join(os.path.dirname(path), "config.json")
    if container == "safetensors" and os.path.isfile(config_path):
        try:
            with open(config_path) as handle:
                metadata["config"] = json.load(handle)
        except (OSError, json.JSONDecodeError):
            pass  # A broken neighbouring config only loses a hint, never weights.
    if not tensors:
        raise CheckpointFormatError(f"{path} holds no tensors.")
    return tensors, metadata


def _atomic_write(path, write):
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    handle, temp = tempfile.mkstemp(dir=directory, prefix=os.path.basename(path) + ".", suffix=".tmp")
    os.close(handle)
    try:
        write(temp)
        os.replace(temp, path)
    except BaseException:
        if os.path.exists(temp):
            os.remove(temp)
        raise


def write_safetensors(path, tensors, metadata=None):
    """Writes `{name: array}` as safetensors, atomically."""
    from safetensors.numpy import save_file

    tensors = {name: np.ascontiguousarray(value) for name, value in tensors.items()}
    metadata = {str(key): str(value) for key, value in (metadata or {}).items()}
    _atomic_write(path, lambda temp: save_file(tensors, temp, metadata=metadata))


def write_npz(path, tensors):
    """Writes `{name: array}` as an uncompressed `.npz`, atomically."""

    def write(temp):
        with open(temp, "wb") as handle:
            np.savez(handle, **tensors)

    _atomic_write(path, write)


def write_json(path, data):
    def write(temp):
        with open(temp, "w") as handle:
            json.dump(data, handle, indent=2, sort_keys=True)
            handle.write("\n")

    _atomic_write(path, write)
