"""`AttentionPooling`: multihead attention pooling from a learned query, the MAP head of SigLIP."""

import math

import keras
from keras import ops

from keras_vit.layers.transformer import LAYER_NORM_EPSILON, MLPBlock, dense_over_tokens, masked_logits, xavier_dense
from keras_vit.utils import serialization, validation


@serialization.register
class AttentionPooling(keras.layers.Layer):
    """Pools tokens `(batch, num_tokens, dim)` to one vector per image: a learned latent attends over the patch
    tokens, then `x + mlp(norm(x))` (the MAP head of Zhai et al. 2022; timm's `AttentionPoolLatent`).

    Args:
        num_heads: int, must divide the token size.
        mlp_dim: int, the hidden size of the MLP.
        num_prefix_tokens: int, the tokens before the patches, which the pooling skips. Defaults to `1`.
        activation: the MLP's activation, one of `MLP_ACTIVATIONS`. Defaults to `"gelu"`.
        epsilon: float, the LayerNorm's epsilon. Defaults to `1e-6`.
        **kwargs: base layer arguments such as `name` and `dtype`.

    Call arguments:
        tokens: tensor `(batch, num_tokens, dim)`.
        padding_mask: optional bool tensor `(batch, num_tokens)`, False for the padding tokens the latent ignores.

    Example:

    >>> keras.ops.shape(AttentionPooling(num_heads=2, mlp_dim=32)(np.ones((2, 5, 8))))
    (2, 8)
    """

    def __init__(
        self, num_heads, mlp_dim, num_prefix_tokens=1, activation="gelu", epsilon=LAYER_NORM_EPSILON, **kwargs
    ):
        super().__init__(**kwargs)
        self.num_heads = validation.positive_int("num_heads", num_heads)
        self.mlp_dim = mlp_dim
        self.num_prefix_tokens = validation.non_negative_int("num_prefix_tokens", num_prefix_tokens)
        self.activation = activation
        self.epsilon = epsilon
        policy = self.dtype_policy
        self.norm = keras.layers.LayerNormalization(epsilon=epsilon, dtype=policy, name="norm")
        # The MLP checks `mlp_dim` and `activation`.
        self.mlp = MLPBlock(mlp_dim, activation=activation, dtype=policy, name="mlp")

    def build(self, input_shape):
        dim = input_shape[-1]
        if dim % self.num_heads:
            raise ValueError(
                f"The token size must be divisible by num_heads={self.num_heads}. Received: input_shape={input_shape}"
            )
        self.head_dim = dim // self.num_heads
        # timm's initialisation of the latent.
        self.latent = self.add_weight(
            shape=(1, 1, dim), initializer=keras.initializers.TruncatedNormal(stddev=dim**-0.5), name="latent"
        )
        policy = self.dtype_policy
        self.query = xavier_dense(dim, (None, dim), policy, "query")
        self.key_value = xavier_dense(2 * dim, input_shape, policy, "key_value")
        self.output_projection = xavier_dense(dim, (None, dim), policy, "output")
        self.norm.build((None, dim))
        self.mlp.build((None, dim))

    def call(self, tokens, padding_mask=None):
        tokens = tokens[:, self.num_prefix_tokens :]
        batch, length = ops.shape(tokens)[0], ops.shape(tokens)[1]
        latent = ops.cast(ops.reshape(self.latent, (1, -1)), tokens.dtype)
        query = ops.reshape(self.query(latent), (self.num_heads, self.head_dim))
        key_value = dense_over_tokens(self.key_value, tokens)
        key_value = ops.reshape(key_value, (batch, length, 2, self.num_heads, self.head_dim))
        key, value = ops.unstack(key_value, num=2, axis=2)
        logits = ops.einsum("hd,bkhd->bhk", query * ops.cast(1.0 / math.sqrt(self.head_dim), query.dtype), key)
        mask = None if padding_mask is None else ops.cast(padding_mask, "bool")[:, None, self.num_prefix_tokens :]
        # Softmax in float32 keeps float16 from overflowing.
        weights = ops.cast(ops.softmax(masked_logits(logits, mask), axis=-1), value.dtype)
        pooled = ops.reshape(ops.einsum("bhk,bkhd->bhd", weights, value), (batch, self.num_heads * self.head_dim))
        pooled = self.output_projection(pooled)
        return pooled + self.mlp(self.norm(pooled))

    def compute_output_shape(self, input_shape):
        return (input_shape[0], input_shape[-1])

    def get_config(self):
        # The quantized Dense sublayers' policies, which Keras would not save.
        return {**super().get_config(), **serialization.arguments(self), "dtype": serialization.dtype_config(self)}
