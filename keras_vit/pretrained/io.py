"""Reading and writing checkpoint files as dicts of NumPy arrays, safely.

Two containers are read: NumPy `.npz` (the official JAX checkpoints) and
safetensors (timm and Hugging Face). Nothing is ever unpickled. Every
declaration (safetensors header fields, each `.npz` member's `.npy` header
and size) is checked before any data is read or decompressed, and every
malformed value is a `MalformedCheckpointError` naming the file and the
field; safetensors data is then read by the `safetensors` library.
PyTorch `.pth`/`.bin` pickles are recognised by their bytes and refused with
a message that says how to convert them.

Writes go through `keras_vit.utils.files`, so a crash never leaves a half-written
checkpoint behind.
"""

import json
import os
import struct
import zipfile
import zlib

import numpy as np

from keras_vit.pretrained.errors import CheckpointFormatError, CorruptCheckpointError, MalformedCheckpointError
from keras_vit.utils import extras, files

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
        if "model.weights.h5" in names and "config.json" in names:
            raise CheckpointFormatError(
                f"{path} is a Keras .keras save (a whole model), not a checkpoint. Load it with "
                f"`keras.saving.load_model({path!r})`, or convert its weights for `weights=` with "
                f"`keras-vit convert {path} weights.npz` (then `weights='weights.npz'`)."
            )
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


class DeclaredTensor:
    """A tensor as the file declares it (name, shape, dtype), read only when used.

    Readers check every declaration before any data is read or
    decompressed; `np.asarray(tensor)` reads the bytes. A converter that
    refuses a checkpoint for an unexpected name therefore never reads (or
    inflates) that tensor, and `placeholder()` gives a zero-memory array of
    the declared shape for a dry run of the conversion.

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

    @property
    def nbytes(self):
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize

    def placeholder(self):
        """A read-only array of the declared shape and dtype that takes no memory (all strides 0)."""
        return np.broadcast_to(np.zeros((), self.dtype), self.shape)

    def __array__(self, dtype=None, copy=None):
        array = self._read()
        return array if dtype is None else array.astype(dtype)

    def __repr__(self):
        return f"DeclaredTensor({self.name!r}, shape={self.shape}, dtype={self.dtype})"


def _malformed(path, field, problem):
    return MalformedCheckpointError(path, field, problem)


def _natural(value):
    # JSON integers only: bools, floats and strings are refused (json gives Python ints for integers).
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _safetensors_header(path):
    """Reads and checks the JSON header field by field; returns (entries, metadata, data_start)."""
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
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as error:
            raise _malformed(path, "header", f"is not valid JSON ({error})") from error
    if not isinstance(header, dict):
        raise _malformed(path, "header", f"must be a JSON object, not {type(header).__name__}")
    metadata = header.pop("__metadata__", None) or {}
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise _malformed(path, "header['__metadata__']", "must map names to strings")
    entries = []
    for name, spec in header.items():
        field = f"header[{name!r}]"
        if not isinstance(spec, dict) or set(spec) != {"dtype", "shape", "data_offsets"}:
            raise _malformed(path, field, "must have exactly the keys dtype, shape and data_offsets")
        dtype, shape, offsets = spec["dtype"], spec["shape"], spec["data_offsets"]
        if dtype not in _SAFETENSORS_DTYPES:
            raise CheckpointFormatError(f"{path}: {field}.dtype {dtype!r} is not one of {sorted(_SAFETENSORS_DTYPES)}.")
        if not isinstance(shape, list) or not all(_natural(d) for d in shape):
            raise _malformed(path, f"{field}.shape", f"must be a list of non-negative integers, not {shape!r}")
        if not isinstance(offsets, list) or len(offsets) != 2 or not all(_natural(o) for o in offsets):
            raise _malformed(path, f"{field}.data_offsets", f"must be two non-negative integers, not {offsets!r}")
        begin, end = offsets
        itemsize = np.dtype(_SAFETENSORS_DTYPES[dtype]).itemsize
        if end - begin != itemsize * int(np.prod(shape, dtype=object)):
            raise _malformed(
                path, f"{field}.data_offsets", f"[{begin}, {end}) do not hold a {dtype} tensor of shape {shape}"
            )
        entries.append((begin, end, name, dtype, tuple(shape)))
    entries.sort()
    expected_end = 0
    for begin, end, name, _, _ in entries:
        if begin != expected_end:
            raise _malformed(path, f"header[{name!r}].data_offsets", "do not start where the previous tensor ends")
        expected_end = end
    data_start = 8 + header_size
    if data_start + expected_end != size:
        raise CorruptCheckpointError(
            f"{path} should have {data_start + expected_end} bytes according to its header but has "
            f"{size}: it is truncated or padded. Delete it and download it again."
        )
    return entries, metadata, data_start


def read_safetensors(path, with_metadata=False, lazy=False):
    """Reads a safetensors file into `{name: np.ndarray}` without unpickling.

    The header is checked field by field here (so that every malformed
    value is a `MalformedCheckpointError` naming the tensor and the field),
    then the `safetensors` library opens the file (its own checks, its
    errors wrapped into ours) and reads the tensors. bfloat16 tensors are
    read from their checked byte range here, because NumPy has no bfloat16
    and the library's NumPy reader refuses them; they are widened to float32
    (exact: bfloat16 is the top half of a float32).

    Args:
        path: the file.
        with_metadata: also return the header's `__metadata__` dict.
        lazy: return `DeclaredTensor`s, read when converted to arrays.

    Returns:
        The dict (and the metadata dict).

    Raises:
        MalformedCheckpointError: a malformed header field.
        CorruptCheckpointError: byte ranges that do not tile the file (a
            truncated download, for instance) or that the library refuses.
    """
    extras.check("safetensors", needed_for="reading a .safetensors checkpoint")
    from safetensors import SafetensorError, safe_open

    path = os.fspath(path)
    entries, metadata, data_start = _safetensors_header(path)
    try:
        with safe_open(path, framework="numpy"):
            pass
    except SafetensorError as error:
        raise CorruptCheckpointError(f"{path}: the safetensors library refuses the file: {error}") from error

    def reader(name, dtype, begin, end, shape):
        def read():
            if dtype == "BF16":
                with open(path, "rb") as handle:
                    handle.seek(data_start + begin)
                    raw = np.frombuffer(handle.read(end - begin), dtype="<u2").reshape(shape)
                return (raw.astype(np.uint32) << 16).view(np.float32)
            try:
                with safe_open(path, framework="numpy") as handle:
                    return handle.get_tensor(name)  # an owned, writeable copy already
            except SafetensorError as error:
                raise CorruptCheckpointError(f"{path}: cannot read tensor {name!r}: {error}") from error

        return read

    tensors = {}
    for begin, end, name, dtype, shape in entries:
        declared = np.float32 if dtype == "BF16" else _SAFETENSORS_DTYPES[dtype]
        tensors[name] = DeclaredTensor(name, shape, declared, reader(name, dtype, begin, end, shape))
    if not lazy:
        tensors = {name: np.asarray(tensor) for name, tensor in tensors.items()}
    return (tensors, metadata) if with_metadata else tensors


def _npz_declarations(path, archive):
    """Checks every member's .npy header against the archive's declared sizes (decompressing only the headers)."""
    declared = {}
    for info in archive.infolist():
        field = f"member {info.filename!r}"
        if not info.filename.endswith(".npy") or info.is_dir():
            raise _malformed(path, field, "is not a .npy array (an .npz holds only .npy members)")
        if info.flag_bits & 0x1:
            raise _malformed(path, field, "is encrypted")
        name = info.filename[: -len(".npy")]
        if name in declared:
            raise _malformed(path, field, "appears twice")
        try:
            with archive.open(info) as member:
                version = np.lib.format.read_magic(member)
                read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else None
                read_header = read_header or np.lib.format.read_array_header_2_0
                shape, fortran_order, dtype = read_header(member)
                header_length = member.tell()
        except (ValueError, EOFError, zipfile.BadZipFile, zlib.error, OSError, SyntaxError) as error:
            raise _malformed(path, f"{field} header", f"cannot be read ({error})") from error
        if dtype.hasobject:
            raise CheckpointFormatError(f"{path}: {field} holds pickled Python objects, which keras_vit never loads.")
        if dtype.kind not in "fiub":
            raise _malformed(path, f"{field} dtype", f"{dtype} is not a numeric type")
        needed = header_length + int(np.prod(shape, dtype=object)) * dtype.itemsize
        if needed != info.file_size:
            raise _malformed(
                path,
                f"{field} size",
                f"is {info.file_size} bytes in the archive directory but its header declares {dtype} {shape} "
                f"({needed} bytes)",
            )
        declared[name] = (info, shape, fortran_order, dtype, header_length)
    return declared


def read_npz(path, lazy=False):
    """Reads an `.npz` into `{name: np.ndarray}`; nothing is unpickled.

    Every member's name, `.npy` header (shape, dtype) and declared size are
    checked before any array data is decompressed, so a small archive
    declaring a huge or unexpected member is refused without inflating it.

    Args:
        path: the file.
        lazy: return `DeclaredTensor`s, decompressed when converted to arrays.

    Raises:
        MalformedCheckpointError: a member that is not a consistent `.npy`.
        CorruptCheckpointError: a damaged archive (bad CRC, truncated member).
        CheckpointFormatError: pickled object arrays inside.
    """
    path = os.fspath(path)
    try:
        with zipfile.ZipFile(path) as archive:
            declared = _npz_declarations(path, archive)
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as error:
        raise CorruptCheckpointError(
            f"{path} is a damaged .npz ({type(error).__name__}: {error}). Delete it and download it again."
        ) from error

    def reader(info, shape, fortran_order, dtype, header_length):
        def read():
            buffer = bytearray(info.file_size)  # writeable without a second copy
            try:
                with zipfile.ZipFile(path) as archive, archive.open(info) as member:
                    filled = member.readinto(buffer)
                    trailing = member.read(1)  # reaching the end makes zipfile check the CRC
            except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as error:
                raise CorruptCheckpointError(
                    f"{path}: member {info.filename!r} is damaged ({error}). Delete the file and download it again."
                ) from error
            if filled != info.file_size or trailing:
                raise CorruptCheckpointError(f"{path}: member {info.filename!r} is truncated.")
            array = np.frombuffer(buffer, dtype=dtype, offset=header_length)
            return array.reshape(shape, order="F" if fortran_order else "C")

        return read

    tensors = {name: DeclaredTensor(name, spec[1], spec[3], reader(*spec)) for name, spec in declared.items()}
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
            raise CheckpointFormatError(
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
        raise CheckpointFormatError(f"{path} holds no tensors.")
    return tensors, metadata


def write_safetensors(path, tensors, metadata=None, replace=True):
    """Writes `{name: array}` as safetensors, atomically (`keras_vit.utils.files`).

    The safetensors library's own hidden temporary file lands in the staging
    folder, so a killed write leaves nothing that the next run does not clean.
    """
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
