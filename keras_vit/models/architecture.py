"""One description of a Vision Transformer: the `Architecture` record.

A frozen record of everything `keras_vit.models.build_model` needs (variant
dimensions, patch, position-embedding grid, hybrid ResNet stages, pooling,
head, representation size, ...), with the things derived from it (pixels per
token). It is read back from a built model's layer configs
(`Architecture.from_model`, also for a ViT nested in a user's model), from
keras_vit-named checkpoint weights by their shapes (`Architecture.from_weights`),
or made from `build_model`'s keywords (`Architecture.from_arguments`, where the
image-size -> patch-grid rule is applied). Export, conversion, inspection,
metadata, layer decay and deploy all read models through it, so no other
module looks layers up by name.

Example:

>>> arch = Architecture.from_arguments(patch_size=8, hidden_dim=32, num_layers=2, num_heads=2, mlp_dim=64,
...     input_shape=(32, 40, 3), classes=10)
>>> arch.grid_size, arch.pixels_per_token
((4, 5), (8, 8))
>>> Architecture.from_model(keras_vit.models.build_model(**arch.arguments())) == arch
True
"""

import collections
import dataclasses
import re

import keras

from keras_vit.layers import resnet, transformer
from keras_vit.models import variants
from keras_vit.utils import validation

# The layer classes a keras_vit ViT is recognised by (never by layer names).
EMBEDDINGS = (transformer.PatchEmbedding, resnet.HybridPatchEmbedding)
# The variable path of a hybrid's first convolution: its presence marks a hybrid's weights.
ROOT_KERNEL = "patch_embedding/backbone/conv_root/kernel"

ViTLayers = collections.namedtuple(
    "ViTLayers",
    [
        "model",
        "rescaling",
        "channels_first",
        "patch_embedding",
        "class_token",
        "position_embedding",
        "blocks",
        "pooling",
        "feature_map",
        "pre_logits",
        "head",
        "predictions",
    ],
)
ViTLayers.__doc__ = """The layers of a keras_vit ViT, found by their classes and their order in the model.

Attributes:
    model: the `keras.Model` whose own layers these are (the ViT itself, also when it is nested in a user's model).
    rescaling: the pixel-scaling `Rescaling` layers before the patch embedding (empty without preprocessing).
    channels_first: whether the model takes channels-first images (a `Permute` before the embedding).
    patch_embedding: the `PatchEmbedding` or `HybridPatchEmbedding`.
    class_token: the `ClassToken`, or None.
    position_embedding: the `PositionEmbedding`.
    blocks: the `TransformerBlock`s, in the order they are applied.
    pooling, feature_map: the `TokenPooling` / `PatchFeatureMap`, or None.
    pre_logits, head: the `Dense` layers after the pooling (pre_logits has the tanh activation), or None.
    predictions: the head's `Activation` layer, or None.
"""


def _own_layers(model):
    return list(getattr(model, "layers", ()))


def _is_vit(model):
    layers = _own_layers(model)
    return any(isinstance(layer, transformer.TransformerBlock) for layer in layers) and any(
        isinstance(layer, EMBEDDINGS) for layer in layers
    )


def find_vit(model):
    """The model holding the ViT's embedding layers and transformer blocks.

    The one search of the package: the ViT is recognised by its registered
    layer classes (a patch embedding and `TransformerBlock`s among a model's
    own layers), at any depth of nesting, outermost first.

    Args:
        model: a `keras.Model`: a keras_vit model, or a user's model with one
            nested in it (at any depth).

    Returns:
        `model` itself when its own layers are the ViT's, else the nested
        model that holds them.

    Raises:
        ValueError: no model inside `model` holds a patch embedding and
            `TransformerBlock` layers.
    """
    pending = [model]
    while pending:
        layer = pending.pop(0)
        if _is_vit(layer):
            return layer
        pending.extend(_own_layers(layer))
    raise ValueError(
        f"Model {getattr(model, 'name', model)!r} holds no keras_vit Vision Transformer (no patch embedding and "
        "TransformerBlock layers, nested or not). Pass a model built with keras_vit."
    )


def _after(layers, start, kind, accept=lambda layer: True):
    """The first layer of class `kind` after position `start` that `accept`s, or None."""
    return next((layer for layer in layers[start + 1 :] if isinstance(layer, kind) and accept(layer)), None)


def vit_layers(model):
    """The `ViTLayers` of the ViT in `model` (see `find_vit`).

    Functional models list their layers in the order they are applied, so
    the layers are found by class and position: the `Rescaling` before the
    embedding, the `Dense` with a tanh activation right after the pooling
    (pre_logits), the next `Dense` (the head) and its `Activation`.
    """
    vit = find_vit(model)
    layers = _own_layers(vit)
    embedding = next(layer for layer in layers if isinstance(layer, EMBEDDINGS))
    start = layers.index(embedding)
    blocks = [layer for layer in layers if isinstance(layer, transformer.TransformerBlock)]
    last = layers.index(blocks[-1])
    pooling = _after(layers, last, transformer.TokenPooling)
    pre_logits = head = predictions = None
    if pooling is not None:
        dense = _after(layers, layers.index(pooling), keras.layers.Dense)
        # The attribute, not get_config(): Keras's serializer imports TensorFlow (on jax / torch too).
        if dense is not None and getattr(dense.activation, "__name__", None) == "tanh":
            pre_logits, dense = dense, _after(layers, layers.index(dense), keras.layers.Dense)
        head = dense
    if head is not None:
        predictions = _after(layers, layers.index(head), keras.layers.Activation)
    return ViTLayers(
        model=vit,
        rescaling=tuple(layer for layer in layers[:start] if isinstance(layer, keras.layers.Rescaling)),
        channels_first=any(isinstance(layer, keras.layers.Permute) for layer in layers[:start]),
        patch_embedding=embedding,
        class_token=next((layer for layer in layers if isinstance(layer, transformer.ClassToken)), None),
        position_embedding=next(layer for layer in layers if isinstance(layer, transformer.PositionEmbedding)),
        blocks=tuple(blocks),
        pooling=pooling,
        feature_map=_after(layers, last, transformer.PatchFeatureMap),
        pre_logits=pre_logits,
        head=head,
        predictions=predictions,
    )


def _optional_int(name, value):
    return None if value is None else validation.positive_int(name, value)


@dataclasses.dataclass(frozen=True)
class Architecture:
    """An immutable description of a Vision Transformer: what `build_model` builds.

    Attributes:
        patch_size: `(height, width)` of the patches (of the pixels, or of a
            hybrid's ResNet feature map).
        hidden_dim: int, the token size.
        num_layers: int, the number of transformer blocks.
        num_heads: int, the attention heads per block.
        mlp_dim: int, the hidden size of each MLP block.
        grid_size: `(rows, cols)`, the patch grid the position embedding is
            stored at.
        image_size: `(height, width)` of the model's input; either may be
            None (any size).
        channels: int, the input's channels.
        resnet_stages: None for a plain ViT, else a hybrid's ResNet units per
            stage (`()` for the root only).
        resnet_width: int, the hybrid ResNet's root width.
        num_prefix_tokens: int, the tokens before the patches (the class token).
        include_top: bool, whether the model ends in a classification head.
        pooling: `"token"`, `"gap"`, `"max"` or None (features out).
        classes: int, the head's classes; None without a head.
        classifier_activation: the head's activation; None for logits or
            without a head.
        representation_size: int, the `pre_logits` size, or None.
        return_sequence: bool, whether a model without head and pooling
            returns the token sequence instead of the feature map.
        gelu_approximate: bool, tanh-approximate GELU.
        include_preprocessing: bool, whether the model scales raw [0, 255]
            pixels itself.
        resample_method, resample_antialias: how the position embedding
            follows images of another size.
        dropout_rate, attention_dropout_rate, drop_path_rate: the training
            regularisation (`drop_path_rate` is the last block's).
        remat: bool, whether the blocks are recomputed in the backward pass.
        patch_dropout_rate: float, the fraction of patch tokens a training
            image drops (`PatchDropout`); 0 for none.
    """

    patch_size: tuple
    hidden_dim: int
    num_layers: int
    num_heads: int
    mlp_dim: int
    grid_size: tuple
    image_size: tuple = (None, None)
    channels: int = 3
    resnet_stages: tuple = None
    resnet_width: int = 64
    num_prefix_tokens: int = 1
    include_top: bool = True
    pooling: str = "token"
    classes: int = 1000
    classifier_activation: object = "softmax"
    representation_size: int = None
    return_sequence: bool = False
    gelu_approximate: bool = False
    include_preprocessing: bool = True
    resample_method: str = "official"
    resample_antialias: bool = False
    dropout_rate: float = 0.0
    attention_dropout_rate: float = 0.0
    drop_path_rate: float = 0.0
    remat: bool = False
    patch_dropout_rate: float = 0.0

    def __post_init__(self):
        # Tuples, so that records compare equal whichever sequence type they were made from.
        set_field = object.__setattr__
        set_field(self, "patch_size", validation.pair("patch_size", self.patch_size))
        set_field(self, "grid_size", validation.pair("grid_size", self.grid_size))
        set_field(self, "image_size", tuple(self.image_size))
        if self.resnet_stages is not None:
            set_field(self, "resnet_stages", tuple(self.resnet_stages))
        if not self.include_top:
            set_field(self, "classes", None)
            set_field(self, "classifier_activation", None)

    @property
    def is_hybrid(self):
        """Whether the tokens are patches of a ResNet feature map (paper section 3.1)."""
        return self.resnet_stages is not None

    @property
    def pixels_per_token(self):
        """`(height, width)`: image pixels per token side, as the patch embedding layer answers it."""
        if self.is_hybrid:
            return resnet.HybridPatchEmbedding.pixels_per_token_for(self.patch_size, self.resnet_stages)
        return transformer.PatchEmbedding.pixels_per_token_for(self.patch_size)

    @property
    def grid_image_size(self):
        """`(height, width)` of the images whose patch grid is the stored `grid_size`."""
        pixels = self.pixels_per_token
        return (self.grid_size[0] * pixels[0], self.grid_size[1] * pixels[1])

    def replace(self, **changes):
        """A copy with `changes` (the record itself never changes)."""
        return dataclasses.replace(self, **changes)

    def input_shape(self, data_format=None):
        """The model's `input_shape` in `data_format` (default: Keras's image data format)."""
        data_format = data_format or keras.config.image_data_format()
        if data_format == "channels_first":
            return (self.channels, *self.image_size)
        return (*self.image_size, self.channels)

    def arguments(self):
        """The keywords of `build_model` that build this architecture."""
        fields = {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}
        for derived in ("grid_size", "image_size", "channels", "num_prefix_tokens"):
            fields.pop(derived)
        fields["input_shape"] = self.input_shape()
        fields["embedding_grid"] = self.grid_size
        if not self.include_top:
            fields.pop("classes")
            fields.pop("classifier_activation")
        if self.resnet_stages is None:
            fields.pop("resnet_width")
        return fields

    def describe(self):
        """A one-line summary for logs and messages."""
        parts = [
            f"hidden {self.hidden_dim}",
            f"{self.num_layers} blocks",
            f"{self.num_heads} heads" if self.num_heads else "heads not stored",
            f"patch {self.patch_size[0]}x{self.patch_size[1]}",
            f"grid {self.grid_size[0]}x{self.grid_size[1]}",
        ]
        if self.is_hybrid:
            parts.append(f"ResNet stages {self.resnet_stages}")
        parts.append(f"{self.classes}-class head" if self.include_top else "no head")
        if self.representation_size:
            parts.append(f"pre_logits {self.representation_size}")
        return ", ".join(parts)

    @classmethod
    def from_arguments(
        cls,
        patch_size,
        hidden_dim,
        num_layers,
        num_heads,
        mlp_dim,
        include_top=True,
        include_preprocessing=True,
        input_tensor=None,
        input_shape=None,
        pooling=None,
        classes=1000,
        classifier_activation="softmax",
        return_sequence=False,
        representation_size=None,
        dropout_rate=0.0,
        attention_dropout_rate=0.0,
        drop_path_rate=0.0,
        gelu_approximate=False,
        resample_method="official",
        resample_antialias=False,
        embedding_grid=None,
        resnet_stages=None,
        resnet_width=64,
        remat=False,
        patch_dropout_rate=0.0,
    ):
        """The record `build_model` builds for its keywords (see `build_model` for each), checked.

        The image-size -> patch-grid rule is applied here, once:
        `keras_vit.layers.patch_grid` of the input size and the pixels per
        token, or `embedding_grid` (default: the grid of a 224 x 224 image)
        when the size is left open.
        """
        num_layers = validation.positive_int("num_layers", num_layers)
        # Keras's applications ignore `classes` without a head; with one it must be a count.
        classes = validation.positive_int("classes", classes) if include_top is True else classes
        representation_size = _optional_int("representation_size", representation_size)
        for arg_name, value in (
            ("dropout_rate", dropout_rate),
            ("attention_dropout_rate", attention_dropout_rate),
            ("drop_path_rate", drop_path_rate),
            ("patch_dropout_rate", patch_dropout_rate),
        ):
            validation.rate(arg_name, value)
        for arg_name, value in (
            ("include_top", include_top),
            ("include_preprocessing", include_preprocessing),
            ("return_sequence", return_sequence),
            ("remat", remat),
        ):
            validation.boolean(arg_name, value)
        pooling = variants.resolve_pooling(pooling, include_top)
        _check_outputs(include_top, pooling, representation_size, return_sequence, patch_dropout_rate)
        data_format = keras.config.image_data_format()
        input_shape = variants.resolve_input_shape(input_shape, input_tensor, include_top, data_format)
        height, width, channels = variants.channels_last(input_shape, data_format)
        record = cls(
            patch_size=patch_size,
            hidden_dim=hidden_dim,
            num_layers=num_layers,
            num_heads=num_heads,
            mlp_dim=mlp_dim,
            # A placeholder until the grid rule below has the pixels per token.
            grid_size=(1, 1),
            image_size=(height, width),
            channels=channels,
            resnet_stages=resnet_stages,
            resnet_width=resnet_width,
            include_top=bool(include_top),
            pooling=pooling,
            classes=classes,
            classifier_activation=classifier_activation,
            representation_size=representation_size,
            return_sequence=return_sequence,
            gelu_approximate=gelu_approximate,
            include_preprocessing=include_preprocessing,
            resample_method=resample_method,
            resample_antialias=resample_antialias,
            dropout_rate=dropout_rate,
            attention_dropout_rate=attention_dropout_rate,
            drop_path_rate=drop_path_rate,
            remat=remat,
            patch_dropout_rate=float(patch_dropout_rate),
        )
        return record.replace(grid_size=record.default_grid(embedding_grid))

    def default_grid(self, embedding_grid=None):
        """The position-embedding grid of this record's image size: the patch grid of a fixed size (padding
        included), else `embedding_grid`, else the grid of a 224 x 224 image."""
        # A hybrid's "same"-padded ResNet and padded patches give the same ceil(size / token) grid as a plain ViT.
        grid = transformer.patch_grid(self.image_size, self.pixels_per_token)
        if None not in grid:
            return grid
        return validation.pair("embedding_grid", embedding_grid or variants.default_grid(self.pixels_per_token))

    @classmethod
    def from_model(cls, model):
        """The record of the ViT in `model`, read from its layers' configs.

        Args:
            model: a keras_vit model, or a user's model with one nested in it
                (at any depth, see `find_vit`); built, or loaded from a
                `.keras` file.

        Returns:
            An `Architecture`.

        Raises:
            ValueError: no keras_vit ViT in `model`.
        """
        parts = vit_layers(model)
        embedding = parts.patch_embedding.get_config()
        position = parts.position_embedding.get_config()
        first, last = parts.blocks[0].get_config(), parts.blocks[-1].get_config()
        input_shape = tuple(parts.model.input_shape[1:])
        if parts.channels_first:
            input_shape = (*input_shape[1:], input_shape[0])
        hybrid = isinstance(parts.patch_embedding, resnet.HybridPatchEmbedding)
        head = parts.head.get_config() if parts.head is not None else None
        return cls(
            patch_size=embedding["patch_size"],
            hidden_dim=embedding["hidden_dim"],
            num_layers=len(parts.blocks),
            num_heads=first["num_heads"],
            mlp_dim=first["mlp_dim"],
            grid_size=position["grid_size"],
            image_size=input_shape[:2],
            channels=input_shape[2],
            resnet_stages=embedding["stage_depths"] if hybrid else None,
            resnet_width=embedding["width"] if hybrid else 64,
            num_prefix_tokens=position["num_prefix_tokens"],
            include_top=head is not None,
            pooling=None if parts.pooling is None else parts.pooling.get_config()["mode"],
            classes=None if head is None else head["units"],
            classifier_activation=None if parts.predictions is None else parts.predictions.get_config()["activation"],
            representation_size=None if parts.pre_logits is None else parts.pre_logits.get_config()["units"],
            return_sequence=parts.pooling is None and parts.feature_map is None,
            gelu_approximate=first["gelu_approximate"],
            include_preprocessing=bool(parts.rescaling),
            resample_method=position["resample_method"],
            resample_antialias=position["resample_antialias"],
            dropout_rate=first["dropout_rate"],
            attention_dropout_rate=first["attention_dropout_rate"],
            drop_path_rate=last["drop_path_rate"],
            remat=first.get("remat", False),
            patch_dropout_rate=next(
                (layer.rate for layer in _own_layers(parts.model) if isinstance(layer, transformer.PatchDropout)), 0.0
            ),
        )

    @classmethod
    def from_weights(cls, weights, num_heads, grid_size=None, **options):
        """The record of keras_vit-named checkpoint weights, read from their shapes.

        Sizes come from the tensors' shapes: hidden size and patch from the
        patch kernel, the MLP size from the first block's `fc1` kernel, the
        blocks and a hybrid's ResNet units from which blocks and units have
        weights, classes and `pre_logits` from the head's. The attention
        heads cannot be read from a fused `qkv` kernel, so the caller passes
        them (from per-head tensors where the file has them, see
        `keras_vit.pretrained.loader.Checkpoint.architecture`).

        Args:
            weights: `{keras_vit variable path: array}`, e.g. a converted checkpoint.
            num_heads: int, the attention heads.
            grid_size: `(rows, cols)` of the position embedding; None takes a
                square grid from its number of rows.
            **options: other fields (e.g. `gelu_approximate`).

        Returns:
            An `Architecture` with the input size left open.

        Raises:
            ValueError: the weights are not a ViT's, or `grid_size` does not
                match the position embedding's rows.
        """
        patch_kernel = weights["patch_embedding/projection/kernel"]
        positions = int(weights["position_embedding/embedding"].shape[1]) - 1
        grid_size = _square_grid(positions) if grid_size is None else validation.pair("grid_size", grid_size)
        if grid_size[0] * grid_size[1] != positions:
            raise ValueError(
                f"The position embedding has {positions} patch rows, but grid_size {grid_size} has "
                f"{grid_size[0] * grid_size[1]}."
            )
        stages = embedding_stages(weights)
        head = weights.get("head/kernel")
        pre_logits = weights.get("pre_logits/kernel")
        fields = dict(
            patch_size=tuple(int(size) for size in patch_kernel.shape[:2]),
            hidden_dim=int(patch_kernel.shape[-1]),
            num_layers=num_blocks(weights),
            num_heads=validation.positive_int("num_heads", num_heads),
            mlp_dim=int(weights["encoder_block_0/mlp/fc1/kernel"].shape[-1]),
            grid_size=grid_size,
            channels=int((weights.get(ROOT_KERNEL) if stages is not None else patch_kernel).shape[2]),
            resnet_stages=stages,
            resnet_width=int(weights[ROOT_KERNEL].shape[-1]) if stages is not None else 64,
            include_top=head is not None,
            pooling="token",
            classes=None if head is None else int(head.shape[-1]),
            representation_size=None if pre_logits is None else int(pre_logits.shape[-1]),
        )
        return cls(**{**fields, **options})


def _check_outputs(include_top, pooling, representation_size, return_sequence, patch_dropout_rate=0.0):
    if patch_dropout_rate and pooling is None and not return_sequence:
        raise ValueError(
            "`patch_dropout_rate` drops patch tokens in training, so the feature map (include_top=False, "
            "pooling=None) could not be laid out: pass a pooling, return_sequence=True or patch_dropout_rate=0. "
            f"Received: patch_dropout_rate={patch_dropout_rate}"
        )
    if not include_top and representation_size is not None and pooling is None:
        raise ValueError(
            "`representation_size` (pre_logits) applies to pooled features: pass "
            "`pooling='token'`, `'gap'` or `'max'` with include_top=False."
        )
    if return_sequence and (include_top or pooling is not None):
        raise ValueError(
            "`return_sequence=True` returns the token sequence of a model without head and pooling: pass "
            f"include_top=False and pooling=None. Received: include_top={include_top}, pooling={pooling!r}"
        )


def _square_grid(positions):
    side = int(round(positions**0.5))
    if side * side != positions:
        raise ValueError(
            f"The position embedding has {positions} patch rows, which is not a square grid: pass grid_size."
        )
    return (side, side)


def num_blocks(weights):
    """The number of transformer blocks in keras_vit-named `weights` (numbered 0..N-1)."""
    indices = {int(match.group(1)) for name in weights if (match := re.match(r"encoder_block_(\d+)/", name))}
    if indices != set(range(len(indices))):
        raise ValueError(f"The transformer blocks are not numbered 0..N-1: found {sorted(indices)}.")
    return len(indices)


def embedding_stages(weights):
    """A hybrid's ResNet units per stage in keras_vit-named `weights` (`()` for the root only), None if plain."""
    if ROOT_KERNEL not in weights:
        return None
    units = {}
    for name in weights:
        if match := re.match(r"patch_embedding/backbone/block(\d+)_unit(\d+)/conv1/kernel$", name):
            units.setdefault(int(match.group(1)), set()).add(int(match.group(2)))
    return tuple(len(units[stage]) for stage in sorted(units))


def pixels_per_token_of_weights(weights):
    """Image pixels per token side of keras_vit-named `weights` (before the record can be made)."""
    patch = tuple(int(size) for size in weights["patch_embedding/projection/kernel"].shape[:2])
    stages = embedding_stages(weights)
    if stages is None:
        return transformer.PatchEmbedding.pixels_per_token_for(patch)
    return resnet.HybridPatchEmbedding.pixels_per_token_for(patch, stages)
