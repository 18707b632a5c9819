"""Every head the models put on the encoder, each one `Head`: its name and its table,
TF1 variable name -> its shape, its `transformers` state-dict key and how the model
initializes it; and the `transformers` classes, by the heads they hold.

One definition read by everything that names these variables: the models create the
fine-tuning heads from them (`albert_tf.modeling.tasks`), the TF1 variable oracle is
built from them (`albert_tf.modeling.tf1_variables`), `albert_tf.checkpoints.huggingface`
maps them to state-dict keys and `albert_tf.convert` recognizes a model from them. A
model holds its heads in its class attribute `heads`; a task module with a head of its
own puts its `Head` there too, and nowhere else (its keys then reach Hugging Face where
its model names a `transformers` class whose keys they are).

Shapes take the config and the head's number of outputs (`num_labels`; 1 for the
multiple-choice scorer, 2 for SQuAD v1.1's start and end; the pretraining and SQuAD
v2.0 heads have a fixed size). A `transformers` fine-tuning head is [num_outputs, H] as
the TF1 one; its dense layers' weights are the transpose of a TF1 kernel (`transposed`).
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Mapping, NamedTuple

from albert_tf import names


class HeadVariable(NamedTuple):
    shape: Callable[[object, int], tuple[int, ...]]  # (config, num_outputs) -> shape
    hf_key: str | None  # the key after the model's prefix (`classifier.weight`); None: none
    initial: str | None  # "weights": truncated normal (stddev 0.02); "zeros"; None: the
    #                      model's own layers create it
    transposed: bool = False  # the state-dict value is the transpose of the TF1 one


@dataclasses.dataclass(frozen=True, eq=False)
class Head:
    """A head's variables, TF1 name -> `HeadVariable`, in the order the model creates
    them: the first is the head's [num_outputs, ...] weights, what tells the head in a
    checkpoint. Two heads are the same head when their names are."""

    name: str
    variables: Mapping[str, HeadVariable]

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"a head's name must be a non-empty string, got {self.name!r}")
        if not self.variables or not all(isinstance(v, HeadVariable)
                                         for v in self.variables.values()):
            raise ValueError(f"head {self.name!r}: its variables must be a non-empty dict "
                             "of TF1 name -> HeadVariable")

    def __eq__(self, other):
        return isinstance(other, Head) and other.name == self.name

    def __hash__(self):
        return hash(self.name)


def _weights(hf_key: str | None) -> HeadVariable:
    return HeadVariable(lambda config, n: (n, config.hidden_size), hf_key, "weights")


def _bias(hf_key: str | None) -> HeadVariable:
    return HeadVariable(lambda config, n: (n,), hf_key, "zeros")


def _dense(scope: str, fan_in, fan_out, hf_key: str | None = None, *,
           bias: bool = True) -> dict[str, HeadVariable]:
    """A Keras/TF1 dense layer (`kernel` [in, out], `bias`); fan_in / fan_out: config ->
    size. Its `transformers` `Linear` is `hf_key.weight` (transposed) and `.bias`."""
    table = {f"{scope}/kernel": HeadVariable(
        lambda config, n: (fan_in(config), fan_out(config)),
        hf_key and f"{hf_key}.weight", None, transposed=True)}
    if bias:
        table[f"{scope}/bias"] = HeadVariable(lambda config, n: (fan_out(config),),
                                              hf_key and f"{hf_key}.bias", None)
    return table


def _layer_norm(scope: str, width, hf_key: str | None = None) -> dict[str, HeadVariable]:
    return {f"{scope}/beta": HeadVariable(lambda config, n: (width(config),),
                                          hf_key and f"{hf_key}.bias", None),
            f"{scope}/gamma": HeadVariable(lambda config, n: (width(config),),
                                           hf_key and f"{hf_key}.weight", None)}


def _hidden(config) -> int:
    return config.hidden_size


def _two_hidden(config) -> int:
    return 2 * config.hidden_size


def _embedding(config) -> int:
    return config.embedding_size


def _one(config) -> int:
    return 1


# The original's classifier (`classifier_utils.create_model`) and RACE scorer
# (`race_utils.create_model`): root-scope variables on the pooled output.
POOLED = {"output_weights": _weights("classifier.weight"),
          "output_bias": _bias("classifier.bias")}
_TABLES: dict[str, dict[str, HeadVariable]] = {
    # `run_pretraining.py`'s masked LM (`get_masked_lm_output`): a transform to E, then
    # the tied word embeddings plus a bias per token.
    "masked_lm": {
        **_dense("cls/predictions/transform/dense", _hidden, _embedding, "predictions.dense"),
        **_layer_norm("cls/predictions/transform/LayerNorm", _embedding,
                      "predictions.LayerNorm"),
        "cls/predictions/output_bias": HeadVariable(
            lambda config, n: (config.vocab_size,), "predictions.bias", None),
    },
    # Its sentence-order classifier (`get_sentence_order_output`), two classes.
    "sentence_order": {
        "cls/seq_relationship/output_weights": HeadVariable(
            lambda config, n: (2, config.hidden_size), "sop_classifier.classifier.weight",
            None),
        "cls/seq_relationship/output_bias": HeadVariable(
            lambda config, n: (2,), "sop_classifier.classifier.bias", None),
    },
    "classifier": POOLED,
    "multiple_choice": POOLED,
    # `squad_utils.create_v1_model`: start and end weights in one.
    "squad_v1": {"cls/squad/output_weights": _weights("qa_outputs.weight"),
                 "cls/squad/output_bias": _bias("qa_outputs.bias")},
    # Ours (the original has no NER head), named as the SQuAD v1.1 one.
    "token_classifier": {"cls/ner/output_weights": _weights("classifier.weight"),
                         "cls/ner/output_bias": _bias("classifier.bias")},
    # `squad_utils.create_v2_model`: start logits, end logits conditioned on a start
    # (dense tanh, LayerNorm, dense) and the answerability class (dense tanh, dense
    # without bias), at the root scope. `transformers` has no such head.
    "squad_v2": {
        **_dense("start_logits/dense", _hidden, _one),
        **_dense("end_logits/dense_0", _two_hidden, _hidden),
        **_layer_norm("end_logits/LayerNorm", _hidden),
        **_dense("end_logits/dense_1", _hidden, _one),
        **_dense("answer_class/dense_0", _two_hidden, _hidden),
        **_dense("answer_class/dense_1", _hidden, _one, bias=False),
    },
}


# The package's heads, by name.
HEADS: dict[str, Head] = {name: Head(name, variables) for name, variables in _TABLES.items()}
MASKED_LM, SENTENCE_ORDER, CLASSIFIER, MULTIPLE_CHOICE, SQUAD_V1, TOKEN_CLASSIFIER, \
    SQUAD_V2 = (HEADS[name] for name in ("masked_lm", "sentence_order", "classifier",
                                         "multiple_choice", "squad_v1", "token_classifier",
                                         "squad_v2"))


class HfClass(NamedTuple):
    """A `transformers` ALBERT class: the heads its weights hold, as ours name them, and
    whether its `AlbertModel` has the pooler (the question-answering, token-classification
    and masked-LM classes build it without)."""

    heads: tuple[Head, ...]
    pooler: bool = True


HF_CLASSES: dict[str, HfClass] = {
    names.HF_BASE: HfClass(()),
    names.HF_PRETRAINING: HfClass((MASKED_LM, SENTENCE_ORDER)),
    names.HF_MASKED_LM: HfClass((MASKED_LM,), pooler=False),
    names.HF_SEQUENCE_CLASSIFICATION: HfClass((CLASSIFIER,)),
    names.HF_MULTIPLE_CHOICE: HfClass((MULTIPLE_CHOICE,)),
    names.HF_QUESTION_ANSWERING: HfClass((SQUAD_V1,), pooler=False),
    names.HF_TOKEN_CLASSIFICATION: HfClass((TOKEN_CLASSIFIER,), pooler=False),
}


def weights_name(head: Head) -> str:
    """The head's first variable (a fine-tuning head's [num_outputs, H] weights): what
    tells the head, and its output count, in a checkpoint."""
    return next(iter(head.variables))


def shapes(head: Head, config, num_outputs: int = 0) -> dict[str, tuple[int, ...]]:
    return {name: v.shape(config, num_outputs) for name, v in head.variables.items()}


def num_outputs(head: Head, config, found: dict) -> int | None:
    """The head's number of outputs in a checkpoint whose variables have the shapes
    `found` (TF1 name -> shape): the size of the first axis that its table sizes by the
    outputs; None where the head has no such axis or a variable is absent."""
    for name, variable in head.variables.items():
        one, two = variable.shape(config, 1), variable.shape(config, 2)
        for axis, (a, b) in enumerate(zip(one, two)):
            if a != b:
                return int(found[name][axis]) if name in found else None
    return None


def hf_keys(heads) -> dict[str, tuple[str, bool]]:
    """TF1 name -> (state-dict key after the prefix, transposed) of the heads' variables
    that have one."""
    return {name: (v.hf_key, v.transposed) for head in heads
            for name, v in head.variables.items() if v.hf_key is not None}
