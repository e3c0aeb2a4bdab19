"""Looking up checkpoints in the catalogue, without touching the network.

`resolve(variant, tag, image_size)` turns a tag (or the `"imagenet"` alias)
into one `CheckpointInfo`; an unknown tag raises `ValueError` listing
the variant's valid tags. Where a tag exists at several resolutions, the one
nearest the requested image size wins (ties go to the larger resolution).
"""

import dataclasses

from keras_vit.models.variants import VARIANTS
from keras_vit.pretrained import catalog
from keras_vit.pretrained.converters import FORMATS


@dataclasses.dataclass(frozen=True)
class CheckpointInfo:
    """One published checkpoint file and what is known about it.

    Attributes:
        variant: `"B/16"` etc., a key of `keras_vit.models.variants.VARIANTS`.
        tag: the family, e.g. `"augreg_in21k_ft_in1k"`.
        resolution: the square image size it was trained at.
        classes: classes of its head, or `None` if the file has no head.
        pre_logits: whether it carries the `pre_logits` layer.
        hub_repo, hub_filename: the Hugging Face Hub copy.
        format: layout of the Hub copy, one of `"timm"`, `"hf"`.
        url: the official bucket `.npz` it came from (second source), or None.
        sha256: hex digest of the Hub file if published, else None.
        top1: published ImageNet-1k top-1 in percent, or None.
        top1_source: where `top1` comes from.
        license: the license of the weights.
        preprocessing: dict with mean, std, crop_pct, interpolation.
    """

    variant: str
    tag: str
    resolution: int
    classes: object
    pre_logits: bool
    hub_repo: str
    hub_filename: str
    format: str
    url: object
    sha256: object
    top1: object
    top1_source: object
    license: str
    preprocessing: dict

    @property
    def name(self):
        return f"{self.variant} {self.tag} @{self.resolution}"


def _validate(entry):
    # Cheap consistency checks on the table, run at import: a typo here would
    # otherwise only surface as a 404 on a user's machine.
    if entry["variant"] not in VARIANTS:
        raise AssertionError(f"catalogue row for unknown variant: {entry}")
    if entry["format"] not in FORMATS:
        raise AssertionError(f"catalogue row with unknown format: {entry}")
    if entry["resolution"] % VARIANTS[entry["variant"]]["patch_size"]:
        raise AssertionError(f"catalogue row whose resolution is not a multiple of the patch: {entry}")
    return CheckpointInfo(**entry)


CHECKPOINTS = tuple(_validate(entry) for entry in catalog.CHECKPOINTS)
IMAGENET_ALIAS = catalog.IMAGENET_ALIAS


def checkpoints(variant=None):
    """Returns the `CheckpointInfo`s of one variant (or all), in catalogue order."""
    return [info for info in CHECKPOINTS if variant is None or info.variant == variant]


def available_tags(variant):
    """Returns the sorted tags of `variant`, plus `"imagenet"` where an ImageNet-1k classifier exists."""
    tags = sorted({info.tag for info in checkpoints(variant)})
    if any(tag in catalog.IMAGENET_1K_TAGS for tag in tags):
        tags.append(IMAGENET_ALIAS)
    return tags


def _nearest(candidates, image_size):
    """The candidate whose resolution is nearest `image_size` (height, width)."""
    size = (image_size[0] + image_size[1]) / 2
    # Nearest by the mean side; on a tie prefer the larger (finer) training size.
    return min(candidates, key=lambda info: (abs(info.resolution - size), -info.resolution))


def is_tag(variant, weights):
    return isinstance(weights, str) and weights in available_tags(variant)


def unknown_tag_message(variant, weights):
    tags = available_tags(variant)
    message = (
        f"Unknown weights {weights!r} for ViT-{variant}. Valid tags for ViT-{variant}: "
        f"{', '.join(tags) if tags else '(none published)'}. `weights` also accepts None, a local "
        "checkpoint file (.npz, .safetensors) or directory, or a Hub handle 'hf://org/repo'."
    )
    note = catalog.VARIANT_NOTES.get(variant)
    return f"{message} {note}" if note else message


def resolve(variant, tag, image_size=(224, 224)):
    """Returns the `CheckpointInfo` for `tag` nearest `image_size`.

    Args:
        variant: `"B/16"` etc.
        tag: a tag from `available_tags(variant)` or `"imagenet"`.
        image_size: `(height, width)` the model will be built at.

    Returns:
        A `CheckpointInfo`.

    Raises:
        ValueError: the tag does not exist for the variant (the
            message lists the valid ones). Never touches the network.
    """
    entries = checkpoints(variant)
    if tag == IMAGENET_ALIAS:
        classifiers = [info for info in entries if info.tag in catalog.IMAGENET_1K_TAGS and info.top1 is not None]
        if not classifiers:
            raise ValueError(
                f"No ImageNet-1k classifier is published for ViT-{variant}, so weights='imagenet' has "
                f"nothing to load. {catalog.VARIANT_NOTES.get(variant, '')} "
                f"Valid tags: {', '.join(available_tags(variant)) or '(none)'}."
            )
        resolution = _nearest(classifiers, image_size).resolution
        return max((info for info in classifiers if info.resolution == resolution), key=lambda info: info.top1)
    matching = [info for info in entries if info.tag == tag]
    if not matching:
        raise ValueError(unknown_tag_message(variant, tag))
    return _nearest(matching, image_size)
