"""Every head the models put on the encoder, each one `Head`: its name and its table,
TF1 variable name -> its shape, its `transformers` state-dict key and how the model
initializes it; and the `transformers` classes, by the heads they hold.

One definition read by everything that names these variables: the models create the
heads' layers from them (`albert_tf.modeling.heads`), the TF1 variable oracle is
built from them (`albert_tf.modeling.tf1_variables`), `albert_tf.checkpoints.huggingface`
maps them to state-dict keys and `albert_tf.convert` recognizes a model from them. A
model holds its heads in its class attribute `heads`; a task module with a head of its
own puts its `Head` there too, and nowhere else (its keys then reach Hugging Face where
its model names a `transformers` class whose keys they are). The tables are data and sit
below the models (they import `albert_tf.names` alone), so that the checkpoint readers,
which know variables by name only, read them without the models; the heads' Keras layers
are `albert_tf.modeling.heads`.

Shapes take the config and the head's number of outputs (`num_labels`; 1 for the
multiple-choice scorer, 2 for SQuAD v1.1's start and end; the pretraining and SQuAD
v2.0 heads have a fixed size). A `transformers` fine-tuning head is [num_outputs, H] as
the TF1 one; its dense layers' weights are the transpose of a TF1 kernel (`transposed`).
"""

from __future__ import annotations

import dataclasses
from typing import Callable, NamedTuple

from albert_tf import names

# A size, from the config and the head's number of outputs: (config, num_outputs) -> int.
Size = Callable[[object, int], int]


class HeadVariable(NamedTuple):
    """A head variable as checkpoints hold it."""

    shape: Callable[[object, int], tuple[int, ...]]  # (config, num_outputs) -> shape
    hf_key: str | None  # the key after the model's prefix (`classifier.weight`); None: none
    initial: str | None  # "weights": truncated normal (stddev 0.02); "range": truncated
    #                      normal (the config's initializer_range); "zeros"; None: its layer's
    transposed: bool = False  # the state-dict value is the transpose of the TF1 one


# The parts of a head, each under its TF1 name; the models build their layers from them
# (`albert_tf.modeling.heads.HeadLayers`), and the variables follow from them.
class Variable(NamedTuple):
    """One variable of its own (`output_weights`, `output_bias`)."""

    name: str
    shape: Callable[[object, int], tuple[int, ...]]
    hf_key: str | None = None
    initial: str = "weights"  # see HeadVariable
    transposed: bool = False


class Dense(NamedTuple):
    """A dense layer: `<scope>/kernel` [fan_in, fan_out] (truncated normal, the config's
    initializer_range) and `<scope>/bias` (zeros); its `transformers` `Linear` is
    `hf_key.weight` (transposed) and `.bias`. `activation`: config -> the name of its
    activation as the original's configs name them (`hidden_act`, "tanh"), or None."""

    scope: str
    fan_in: Size
    fan_out: Size
    hf_key: str | None = None
    bias: bool = True
    activation: Callable[[object], object] | None = None


class LayerNorm(NamedTuple):
    """The original's LayerNorm: `<scope>/beta` and `<scope>/gamma` [width]."""

    scope: str
    width: Size
    hf_key: str | None = None


class Dropout(NamedTuple):
    """Where the head's dropout draws its seed, among its parts (no variable)."""

    scope: str


Part = Variable | Dense | LayerNorm | Dropout


def _part_variables(part) -> dict[str, HeadVariable]:
    if isinstance(part, Variable):
        return {part.name: HeadVariable(part.shape, part.hf_key, part.initial,
                                        part.transposed)}
    if isinstance(part, Dense):
        table = {f"{part.scope}/kernel": HeadVariable(
            lambda config, n: (part.fan_in(config, n), part.fan_out(config, n)),
            part.hf_key and f"{part.hf_key}.weight", None, transposed=True)}
        if part.bias:
            table[f"{part.scope}/bias"] = HeadVariable(
                lambda config, n: (part.fan_out(config, n),),
                part.hf_key and f"{part.hf_key}.bias", None)
        return table
    if isinstance(part, LayerNorm):
        return {f"{part.scope}/beta": HeadVariable(lambda config, n: (part.width(config, n),),
                                                   part.hf_key and f"{part.hf_key}.bias",
                                                   None),
                f"{part.scope}/gamma": HeadVariable(
                    lambda config, n: (part.width(config, n),),
                    part.hf_key and f"{part.hf_key}.weight", None)}
    return {}


@dataclasses.dataclass(frozen=True, eq=False)
class Head:
    """A head: its name and its parts, in the order the model creates them. Its
    variables (TF1 name -> `HeadVariable`) follow from the parts; the first is the
    head's [num_outputs, ...] weights, what tells the head in a checkpoint. Two heads are
    the same head when their names are."""

    name: str
    parts: tuple

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"a head's name must be a non-empty string, got {self.name!r}")
        if not (isinstance(self.parts, tuple) and all(
                isinstance(p, (Variable, Dense, LayerNorm, Dropout)) for p in self.parts)):
            raise ValueError(f"head {self.name!r}: its parts must be a tuple of "
                             "task_heads.Variable, Dense, LayerNorm and Dropout")
        if not self.variables:
            raise ValueError(f"head {self.name!r} has no variables")

    @property
    def variables(self) -> dict[str, HeadVariable]:
        return {name: variable for part in self.parts
                for name, variable in _part_variables(part).items()}

    def __eq__(self, other):
        return isinstance(other, Head) and other.name == self.name

    def __hash__(self):
        return hash(self.name)


def _weights(name: str, hf_key: str | None) -> Variable:
    return Variable(name, lambda config, n: (n, config.hidden_size), hf_key, "weights")


def _bias(name: str, hf_key: str | None) -> Variable:
    return Variable(name, lambda config, n: (n,), hf_key, "zeros")


def _hidden(config, n) -> int:
    return config.hidden_size


def _two_hidden(config, n) -> int:
    return 2 * config.hidden_size


def _embedding(config, n) -> int:
    return config.embedding_size


def _one(config, n) -> int:
    return 1


def _pooled(name: str) -> Head:
    """The original's classifier (`classifier_utils.create_model`) and RACE scorer
    (`race_utils.create_model`): root-scope variables on the pooled output, then its
    dropout."""
    return Head(name, (_weights("output_weights", "classifier.weight"),
                       _bias("output_bias", "classifier.bias"), Dropout("dropout")))


HEADS: dict[str, Head] = {head.name: head for head in (
    # `run_pretraining.py`'s masked LM (`get_masked_lm_output`): a transform to E (dense
    # with hidden_act, LayerNorm), then the tied word embeddings plus a bias per token.
    Head("masked_lm", (
        Dense("cls/predictions/transform/dense", _hidden, _embedding, "predictions.dense",
              activation=lambda config: config.hidden_act),
        LayerNorm("cls/predictions/transform/LayerNorm", _embedding,
                  "predictions.LayerNorm"),
        Variable("cls/predictions/output_bias", lambda config, n: (config.vocab_size,),
                 "predictions.bias", "zeros"))),
    # Its sentence-order classifier (`get_sentence_order_output`), two classes.
    Head("sentence_order", (
        Variable("cls/seq_relationship/output_weights",
                 lambda config, n: (2, config.hidden_size),
                 "sop_classifier.classifier.weight", "range"),
        Variable("cls/seq_relationship/output_bias", lambda config, n: (2,),
                 "sop_classifier.classifier.bias", "zeros"))),
    _pooled("classifier"),
    _pooled("multiple_choice"),
    # `squad_utils.create_v1_model`: start and end weights in one, no dropout.
    Head("squad_v1", (_weights("cls/squad/output_weights", "qa_outputs.weight"),
                      _bias("cls/squad/output_bias", "qa_outputs.bias"))),
    # Ours (the original has no NER head), named as the SQuAD v1.1 one, then dropout.
    Head("token_classifier", (_weights("cls/ner/output_weights", "classifier.weight"),
                              _bias("cls/ner/output_bias", "classifier.bias"),
                              Dropout("dropout"))),
    # `squad_utils.create_v2_model`: start logits, end logits conditioned on a start
    # (dense tanh, LayerNorm, dense) and the answerability class (dense tanh, dropout,
    # dense without bias), at the root scope. `transformers` has no such head.
    Head("squad_v2", (
        Dense("start_logits/dense", _hidden, _one),
        Dense("end_logits/dense_0", _two_hidden, _hidden, activation=lambda config: "tanh"),
        LayerNorm("end_logits/LayerNorm", _hidden),
        Dense("end_logits/dense_1", _hidden, _one),
        Dense("answer_class/dense_0", _two_hidden, _hidden,
              activation=lambda config: "tanh"),
        Dropout("answer_class/dropout"),
        Dense("answer_class/dense_1", _hidden, _one, bias=False))),
)}
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
