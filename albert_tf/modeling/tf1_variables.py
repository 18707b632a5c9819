"""The variables the original TF1 code creates for a config: names and shapes.

This restates, from the config alone and without building anything, the scopes of the
original `modeling.py` and `run_pretraining.py`. It is the oracle the tests hold the
Keras models to (and which the fixture checkpoint of the original code confirms), and it
gives parameter counts of any size instantly.
"""

from __future__ import annotations

from albert_tf import task_heads
from albert_tf.config import AlbertConfig


def _dense(scope: str, fan_in: int, fan_out: int) -> dict[str, tuple[int, ...]]:
    return {f"{scope}/kernel": (fan_in, fan_out), f"{scope}/bias": (fan_out,)}


def _layer_norm(scope: str, width: int) -> dict[str, tuple[int, ...]]:
    return {f"{scope}/beta": (width,), f"{scope}/gamma": (width,)}


def embedding_variables(config: AlbertConfig) -> dict[str, tuple[int, ...]]:
    e = config.embedding_size
    return {
        "bert/embeddings/word_embeddings": (config.vocab_size, e),
        "bert/embeddings/token_type_embeddings": (config.type_vocab_size, e),
        "bert/embeddings/position_embeddings": (config.max_position_embeddings, e),
        **_layer_norm("bert/embeddings/LayerNorm", e),
    }


def mapping_variables(config: AlbertConfig) -> dict[str, tuple[int, ...]]:
    if config.embedding_size == config.hidden_size:
        return {}
    return _dense("bert/encoder/embedding_hidden_mapping_in",
                  config.embedding_size, config.hidden_size)


def block_scope(group: int, inner: int) -> str:
    """The TF1 scope of a transformer block, with its closing slash."""
    return f"bert/encoder/transformer/group_{group}/inner_group_{inner}/"


def block_variables(config: AlbertConfig, group: int, inner: int) -> dict[str, tuple[int, ...]]:
    h, i = config.hidden_size, config.intermediate_size
    scope = block_scope(group, inner).rstrip("/")
    names: dict[str, tuple[int, ...]] = {}
    for part in ("query", "key", "value"):
        names.update(_dense(f"{scope}/attention_1/self/{part}", h, h))
    names.update(_dense(f"{scope}/attention_1/output/dense", h, h))
    names.update(_layer_norm(f"{scope}/LayerNorm", h))
    names.update(_dense(f"{scope}/ffn_1/intermediate/dense", h, i))
    names.update(_dense(f"{scope}/ffn_1/intermediate/output/dense", i, h))
    names.update(_layer_norm(f"{scope}/LayerNorm_1", h))
    return names


def transformer_variables(config: AlbertConfig) -> dict[str, tuple[int, ...]]:
    names: dict[str, tuple[int, ...]] = {}
    for g in config.used_groups():
        for i in range(config.inner_group_num):
            names.update(block_variables(config, g, i))
    return names


def pooler_variables(config: AlbertConfig) -> dict[str, tuple[int, ...]]:
    return _dense("bert/pooler/dense", config.hidden_size, config.hidden_size)


def masked_lm_variables(config: AlbertConfig) -> dict[str, tuple[int, ...]]:
    """`run_pretraining.py`'s masked LM head (`task_heads.MASKED_LM`)."""
    return task_heads.shapes(task_heads.MASKED_LM, config)


def sentence_order_variables(config: AlbertConfig) -> dict[str, tuple[int, ...]]:
    """Its sentence-order classifier (`task_heads.SENTENCE_ORDER`)."""
    return task_heads.shapes(task_heads.SENTENCE_ORDER, config)


def encoder_variables(config: AlbertConfig) -> dict[str, tuple[int, ...]]:
    """Everything under `bert/`: what `AlbertEncoder` holds."""
    return {**embedding_variables(config), **mapping_variables(config),
            **transformer_variables(config), **pooler_variables(config)}


def pretrainer_variables(config: AlbertConfig) -> dict[str, tuple[int, ...]]:
    """`bert/` plus `cls/`: what `AlbertPretrainer` (and a released checkpoint) holds."""
    return {**encoder_variables(config), **masked_lm_variables(config),
            **sentence_order_variables(config)}


def _count(variables: dict[str, tuple[int, ...]]) -> int:
    total = 0
    for shape in variables.values():
        size = 1
        for dim in shape:
            size *= dim
        total += size
    return total


def parameter_counts(config: AlbertConfig) -> dict[str, int]:
    """Parameters by part, plus `encoder` (bert/: embeddings to pooler) and `total`."""
    parts = {
        "embeddings": _count(embedding_variables(config)),
        "embedding_hidden_mapping_in": _count(mapping_variables(config)),
        "transformer": _count(transformer_variables(config)),
        "pooler": _count(pooler_variables(config)),
        "masked_lm_head": _count(masked_lm_variables(config)),
        "sentence_order_head": _count(sentence_order_variables(config)),
    }
    parts["encoder"] = _count(encoder_variables(config))
    parts["total"] = _count(pretrainer_variables(config))
    return parts


# --------------------------------------------------------------------- fine-tuning heads
# The variables the original fine-tuning scripts add to `bert/` (every one of them also
# creates the pooler, used or not). Shapes as the original creates them; the heads with
# their tables are `albert_tf.task_heads`'.


def classifier_variables(config: AlbertConfig, num_labels: int) -> dict[str, tuple[int, ...]]:
    """`classifier_utils.create_model` (run_classifier.py): two variables at the root
    scope, on the pooled output. STS-B (regression) has num_labels = 1."""
    return task_heads.shapes(task_heads.CLASSIFIER, config, num_labels)


def multiple_choice_variables(config: AlbertConfig) -> dict[str, tuple[int, ...]]:
    """`race_utils.create_model` (run_race.py): one score per choice, at the root scope."""
    return task_heads.shapes(task_heads.MULTIPLE_CHOICE, config, 1)


def squad_v1_variables(config: AlbertConfig) -> dict[str, tuple[int, ...]]:
    """`squad_utils.create_v1_model` (run_squad_v1.py): start and end weights in one."""
    return task_heads.shapes(task_heads.SQUAD_V1, config, 2)


def token_classification_variables(config: AlbertConfig,
                                   num_labels: int) -> dict[str, tuple[int, ...]]:
    """Our NER head (the original has none): a score per label at every position, named
    as the SQuAD v1 head is (`cls/<task>/output_weights` [num_labels, H])."""
    return task_heads.shapes(task_heads.TOKEN_CLASSIFIER, config, num_labels)


def squad_v2_variables(config: AlbertConfig) -> dict[str, tuple[int, ...]]:
    """`squad_utils.create_v2_model` (run_squad_v2.py): start logits, end logits
    conditioned on a start and the answerability class, at the root scope."""
    return task_heads.shapes(task_heads.SQUAD_V2, config)
