"""The fine-tuning heads whose variables have a Hugging Face counterpart, each one table:
TF1 variable name -> its shape and its `transformers` state-dict key.

One definition read by everything that names these variables: the models create them
(`albert_tf.modeling.tasks`), the TF1 layout restates them (`albert_tf.modeling.layout`),
`albert_tf.huggingface` maps them to state-dict keys and `albert_tf.convert` recognizes
a head from them. Shapes take the config and the head's number of outputs (`num_labels`;
1 for the multiple-choice scorer, 2 for SQuAD v1.1's start and end). A `transformers`
head is [num_outputs, H] as the TF1 one, so none is transposed. (SQuAD v2.0's head has no
`transformers` counterpart; `layout.squad_v2_variables` lists it.)
"""

from __future__ import annotations

from typing import Callable, NamedTuple


class HeadVariable(NamedTuple):
    shape: Callable[[object, int], tuple[int, ...]]  # (config, num_outputs) -> shape
    hf_key: str     # the key after the model's prefix (`classifier.weight`)
    initial: str    # "weights": truncated normal (stddev 0.02); "zeros"


def _weights(hf_key: str) -> HeadVariable:
    return HeadVariable(lambda config, n: (n, config.hidden_size), hf_key, "weights")


def _bias(hf_key: str) -> HeadVariable:
    return HeadVariable(lambda config, n: (n,), hf_key, "zeros")


# The original's classifier (`classifier_utils.create_model`) and RACE scorer
# (`race_utils.create_model`): root-scope variables on the pooled output.
POOLED = {"output_weights": _weights("classifier.weight"),
          "output_bias": _bias("classifier.bias")}
HEADS: dict[str, dict[str, HeadVariable]] = {
    "classifier": POOLED,
    "multiple_choice": POOLED,
    # `squad_utils.create_v1_model`: start and end weights in one.
    "squad_v1": {"cls/squad/output_weights": _weights("qa_outputs.weight"),
                 "cls/squad/output_bias": _bias("qa_outputs.bias")},
    # Ours (the original has no NER head), named as the SQuAD v1.1 one.
    "token_classifier": {"cls/ner/output_weights": _weights("classifier.weight"),
                         "cls/ner/output_bias": _bias("classifier.bias")},
}


def weights_name(head: str) -> str:
    """The head's [num_outputs, H] weights: what tells the head and its output count
    in a checkpoint."""
    return next(iter(HEADS[head]))


def shapes(head: str, config, num_outputs: int) -> dict[str, tuple[int, ...]]:
    return {name: v.shape(config, num_outputs) for name, v in HEADS[head].items()}
