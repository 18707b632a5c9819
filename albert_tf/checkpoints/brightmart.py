"""brightmart/albert_zh checkpoints, read as an exactly equivalent Google-layout model.

brightmart's `modeling.py` (the `albert_tiny_zh` ... `albert_xlarge_zh` releases; not its
`*_google` ones, which use Google's names) differs from Google's ALBERT in two places:

- embeddings: the [V, E] lookup is multiplied right away by `word_embeddings_2` [E, H]
  (no bias); token-type and position embeddings [*, H] are added and the LayerNorm
  applied at width H. Google adds them at E, normalizes at E and maps E -> H after.
- masked LM: the transform is H -> H with a LayerNorm at H, and the logits are
  (h . W2^T) . W1^T + output_bias, where Google's are h . W^T + output_bias for its
  [V, E] table W.

With W = W1 . W2 ([V, H]) both are Google's math for `embedding_size = hidden_size`:
W[ids] = W1[ids] . W2, and h . W^T = (h . W2^T) . W1^T. The one shared layer
(`bert/encoder/layer_shared/...`, post-LN as BERT) is Google's block with one group and
one inner group under other names. So a brightmart checkpoint is read as a Google
model with E = H (`google_config`) whose word embedding table is W1 . W2: exact up to
float rounding, and everything built for Google's layout (tasks, exports, Hugging Face
write-out) works on it. Saved, it is a Google-layout checkpoint with that config.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from albert_tf.config import AlbertConfig

WORD_EMBEDDINGS = "bert/embeddings/word_embeddings"
PROJECTION = "bert/embeddings/word_embeddings_2"
_SHARED = "bert/encoder/layer_shared/"
_BLOCK = "bert/encoder/transformer/group_0/inner_group_0/"

# brightmart's scope under layer_shared/ -> Google's under group_0/inner_group_0/.
_BLOCK_SCOPES = {
    "attention/self/query": "attention_1/self/query",
    "attention/self/key": "attention_1/self/key",
    "attention/self/value": "attention_1/self/value",
    "attention/output/dense": "attention_1/output/dense",
    "attention/output/LayerNorm": "LayerNorm",
    "intermediate/dense": "ffn_1/intermediate/dense",
    "output/dense": "ffn_1/intermediate/output/dense",
    "output/LayerNorm": "LayerNorm_1",
}


def _block_names() -> dict[str, str]:
    """Google name -> brightmart name for every variable of the shared layer."""
    table = {}
    for theirs, ours in _BLOCK_SCOPES.items():
        leaves = ("beta", "gamma") if theirs.endswith("LayerNorm") else ("kernel", "bias")
        for leaf in leaves:
            table[f"{_BLOCK}{ours}/{leaf}"] = f"{_SHARED}{theirs}/{leaf}"
    return table


BLOCK_NAMES = _block_names()


def is_brightmart(names: Iterable[str]) -> bool:
    """Whether checkpoint `names` are brightmart's albert_zh layout."""
    return any(n == PROJECTION or n.startswith(_SHARED) for n in names)


def google_config(config: AlbertConfig) -> AlbertConfig:
    """The Google-layout config that computes what a brightmart config does:
    `embedding_size = hidden_size`, one group of one layer; `ln_type` (validated as
    "postln" when the config was read) is dropped, brightmart's unused fields are kept."""
    extra = {k: v for k, v in config.extra.items() if k != "ln_type"}
    return config.replace(embedding_size=config.hidden_size, num_hidden_groups=1,
                          inner_group_num=1, extra=extra)


class BrightmartReader:
    """A checkpoint reader (as `tf.train.load_checkpoint` gives) that shows a brightmart
    checkpoint under Google's names: the shared layer renamed, the word embeddings
    multiplied by their projection. Every other entry (pooler, heads, optimizer
    slots, `global_step`) is passed through under its own name."""

    layout = "brightmart"

    def __init__(self, reader):
        self._reader = reader
        shapes = reader.get_variable_to_shape_map()
        dtypes = reader.get_variable_to_dtype_map()
        # Google name -> the brightmart names it is computed from.
        self._sources: dict[str, tuple[str, ...]] = {}
        renamed = {b: g for g, b in BLOCK_NAMES.items()}
        for name in shapes:
            if name == PROJECTION:
                continue
            if name == WORD_EMBEDDINGS and PROJECTION in shapes:
                self._sources[name] = (WORD_EMBEDDINGS, PROJECTION)
            else:
                self._sources[renamed.get(name, name)] = (name,)
        self._shapes, self._dtypes = {}, {}
        for name, sources in self._sources.items():
            self._shapes[name] = list(shapes[sources[0]])
            self._dtypes[name] = dtypes[sources[0]]
        if WORD_EMBEDDINGS in self._sources and PROJECTION in shapes:
            self._shapes[WORD_EMBEDDINGS] = [shapes[WORD_EMBEDDINGS][0], shapes[PROJECTION][1]]

    def get_variable_to_shape_map(self) -> dict[str, list[int]]:
        return dict(self._shapes)

    def get_variable_to_dtype_map(self) -> dict:
        return dict(self._dtypes)

    def source_names(self, name: str) -> tuple[str, ...]:
        """The brightmart entries that Google name `name` is read from."""
        return self._sources[name]

    def get_tensor(self, name: str) -> np.ndarray:
        sources = self._sources[name]
        values = [self._reader.get_tensor(s) for s in sources]
        if len(values) == 2:  # W1 . W2, in float64 so that only the final rounding remains
            w1, w2 = values
            return (w1.astype(np.float64) @ w2.astype(np.float64)).astype(w1.dtype)
        return values[0]
