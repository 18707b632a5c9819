"""Converts ALBERT weights between layouts: `python -m albert_tf.convert`.

    python -m albert_tf.convert --input=albert_tiny_zh --output=albert_tiny_zh_hf
    python -m albert_tf.convert --input=albert_chinese_tiny_hf --output=tf1 --to=google

reads a release directory or checkpoint of any layout (Google's TF1, brightmart's
albert_zh, a Hugging Face directory; `albert_tf.release`) and writes either a Hugging
Face directory that `transformers` loads (`--to=huggingface`, the default) or a Google
release directory (`--to=google`: `albert_config.json`, `model.ckpt.*`, the tokenizer
file) that the original TF1 code and every tool for Google's checkpoints read. The model
(pretraining heads, encoder alone, or a fine-tuned head) is recognized from the weights;
`--model` says it where they cannot (a one-output head is a regression classifier or a
multiple-choice scorer; a TF1 classifier head may be multi-label: `--model=multi_label`,
which a Hugging Face directory says with its `problem_type`). Nothing is written unless
every weight was read (but for the pooler of a model that does not read it:
transformers' question-answering and token-classification models have none).
"""

from __future__ import annotations

import os

import tensorflow as tf
from absl import app, flags, logging

from albert_tf import fileio, huggingface, release, task_heads
from albert_tf.checkpoints import CheckpointError, save_tf1_checkpoint
from albert_tf.modeling import (
    AlbertClassifier,
    AlbertEncoder,
    AlbertMultipleChoice,
    AlbertPretrainer,
    AlbertSquadV1,
    AlbertTokenClassifier,
)
from albert_tf.tasks.multi_label import AlbertMultiLabelClassifier

MODELS = {"pretrainer": AlbertPretrainer, "encoder": AlbertEncoder,
          "classifier": AlbertClassifier, "multiple_choice": AlbertMultipleChoice,
          "squad_v1": AlbertSquadV1, "token_classifier": AlbertTokenClassifier,
          "multi_label": AlbertMultiLabelClassifier}
# The models whose `num_labels` is read from their head's weights [num_labels, H].
_LABELLED_HEADS = {"classifier": task_heads.weights_name("classifier"),
                   "multi_label": task_heads.weights_name("classifier"),
                   "token_classifier": task_heads.weights_name("token_classifier")}
# Hugging Face `problem_type`s of a class that are a model of their own here.
_BY_PROBLEM_TYPE = {(AlbertMultiLabelClassifier.hf_architecture,
                     AlbertMultiLabelClassifier.hf_problem_type): "multi_label"}
TARGETS = ("huggingface", "google")
_BY_ARCHITECTURE = {cls.hf_architecture: name for name, cls in MODELS.items()
                    if getattr(cls, "hf_problem_type", None) is None}


def detect_model(files: release.ReleaseFiles) -> str:
    """The `MODELS` entry that the weights of `files` fill."""
    if files.layout == "huggingface":
        values = huggingface.read_hf_config(files.config_file)[1]
        architectures = values.get("architectures")
        architecture = (architectures or [None])[0]
        name = _BY_PROBLEM_TYPE.get((architecture, values.get("problem_type")),
                                    _BY_ARCHITECTURE.get(architecture))
        if name is None:
            raise CheckpointError(
                f"{files.config_file} names the architectures {architectures}; give "
                f"--model ({', '.join(MODELS)})")
        return name
    shapes = release.weight_shapes(files)
    if "cls/predictions/output_bias" in shapes:
        return "pretrainer"
    for head in ("squad_v1", "token_classifier"):
        if task_heads.weights_name(head) in shapes:
            return head
    pooled = task_heads.weights_name("classifier")  # also the multiple-choice scorer's
    if pooled in shapes:
        if shapes[pooled][0] == 1:
            raise CheckpointError(
                f"{files.checkpoint} has a one-output head: give --model=classifier "
                "(regression) or --model=multiple_choice")
        return "classifier"
    return "encoder"


def load(path, *, model: str = "auto", albert_config_file=None):
    """The model held by `path` (any layout), loaded strictly, and its files."""
    files = release.describe_checkpoint(path)
    if albert_config_file:
        files.config_file = os.fspath(albert_config_file)
    name = detect_model(files) if model == "auto" else model
    if name not in MODELS:
        raise ValueError(f"--model={name}: expected auto or one of {', '.join(MODELS)}")
    kwargs = {}
    if name in _LABELLED_HEADS:
        head = _LABELLED_HEADS[name]
        shapes = release.weight_shapes(files, MODELS[name].hf_architecture)
        if head not in shapes:
            raise CheckpointError(f"{files.checkpoint} has no {name} head ({head})")
        kwargs["num_labels"] = int(shapes[head][0])
    result = MODELS[name](files.load_config(), **kwargs)
    result.load_report = release.load_checkpoint(result, files)
    # Every weight must be read, but for a pooler the model never reads (transformers'
    # question answering and token classification models have none).
    missing = [n for n in result.load_report.missing if not (
        n.startswith("bert/pooler/") and not getattr(result, "reads_pooled_output", True))]
    if missing:
        raise CheckpointError(
            f"{files.checkpoint} lacks {len(missing)} weights of the {name} model: "
            f"{missing}")
    return result, files


def save_google(model, directory, *, spm_model_file=None, vocab_file=None) -> str:
    """A Google release directory: albert_config.json, model.ckpt.*, tokenizer file."""
    directory = os.fspath(directory).rstrip("/")
    with fileio.atomic_directory(directory) as tmp:
        model.config.to_json_file(os.path.join(tmp, "albert_config.json"))
        save_tf1_checkpoint(model, os.path.join(tmp, "model.ckpt"), update_state_file=True)
        for source in (spm_model_file, vocab_file):
            if source:
                tf.io.gfile.copy(source, os.path.join(tmp, os.path.basename(source)))
    return directory


def convert(input_path, output_dir, *, to: str = "huggingface", model: str = "auto",
            albert_config_file=None, do_lower_case: bool | None = None) -> str:
    """Reads `input_path` (any layout) and writes `output_dir` in the layout `to`."""
    if to not in TARGETS:
        raise ValueError(f"--to={to}: expected one of {', '.join(TARGETS)}")
    if fileio.exists(output_dir):
        raise FileExistsError(f"{output_dir} exists; not overwritten")
    result, files = load(input_path, model=model, albert_config_file=albert_config_file)
    logging.info("%s", result.load_report)
    spm, vocab = files.spm_model_file, None if files.spm_model_file else files.vocab_file
    if to == "google":
        return save_google(result, output_dir, spm_model_file=spm, vocab_file=vocab)
    lower = do_lower_case if do_lower_case is not None else (
        True if files.do_lower_case is None else files.do_lower_case)
    return huggingface.save_hf_checkpoint(result, output_dir, spm_model_file=spm,
                                          vocab_file=vocab, do_lower_case=lower)


FLAGS = flags.FLAGS


def define_flags() -> None:
    flags.DEFINE_string("input", None, "A release directory or checkpoint of any layout.")
    flags.DEFINE_string("output", None, "The directory to write (must not exist).")
    flags.DEFINE_enum("to", "huggingface", list(TARGETS), "The layout to write.")
    flags.DEFINE_enum("model", "auto", ["auto", *MODELS], "The model the weights hold.")
    flags.DEFINE_string("albert_config_file", None,
                        "The config, where none lies beside --input.")
    flags.DEFINE_bool("do_lower_case", None, "Recorded in tokenizer_config.json "
                      "(default: the input's, else true).")


def main(argv) -> None:
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
    try:
        path = convert(FLAGS.input, FLAGS.output, to=FLAGS.to, model=FLAGS.model,
                       albert_config_file=FLAGS.albert_config_file,
                       do_lower_case=FLAGS.do_lower_case)
    except (ValueError, OSError) as e:  # CheckpointError, ConfigError, FileExistsError
        raise SystemExit(f"error: {e}") from None
    print(f"wrote {path}")


if __name__ == "__main__":
    define_flags()
    flags.mark_flags_as_required(["input", "output"])
    app.run(main)
