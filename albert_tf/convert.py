"""Converts ALBERT weights between layouts: `python -m albert_tf.convert`.

    python -m albert_tf.convert --input=albert_tiny_zh --output=albert_tiny_zh_hf
    python -m albert_tf.convert --input=albert_chinese_tiny_hf --output=tf1 --to=google

reads a release directory or checkpoint of any layout (Google's TF1, brightmart's
albert_zh, a Hugging Face directory, a keras-hub preset; `albert_tf.checkpoints.release`)
and writes a Hugging Face directory that `transformers` loads (`--to=huggingface`, the
default), a Google release directory (`--to=google`: `albert_config.json`,
`model.ckpt.*`, the tokenizer file) that the original TF1 code and every tool for
Google's checkpoints read, or a keras-hub preset (`--to=keras_hub`: the backbone, and a
classifier's `AlbertTextClassifier`; `albert_tf.checkpoints.keras_hub_preset`). The model
(pretraining heads, encoder alone, or a fine-tuned head) is recognized from the weights;
`--kind` names it, by its serving kind as `export_savedmodel.py --kind` does, where they
cannot (a one-output head is a regression classifier or a multiple-choice scorer; a TF1
classifier head may be multi-label: `--kind=multi_label`, which a Hugging Face directory
says with its `problem_type`). `--model`, its former name, still works and logs that it
is deprecated. Nothing is written unless every weight was read (but for the pooler of a
model that does not read it: transformers' question-answering and token-classification
models have none).
"""

from __future__ import annotations

import os
import sys
import warnings

import tensorflow as tf
from absl import app, flags, logging

from albert_tf import fileio, task_heads, tasks
from albert_tf.checkpoints import (
    CheckpointError,
    huggingface,
    keras_hub_preset,
    release,
    save_tf1_checkpoint,
)

TARGETS = ("huggingface", "google", "keras_hub")


def models() -> dict[str, type]:
    """`--kind`'s choices: the model of every serving kind (`albert_tf.tasks.models`:
    the encoder's, the package's tasks' and a loaded --task_module's)."""
    return tasks.models()


def _by_hf_class(known: dict[str, type]) -> dict[tuple[str, str | None], str]:
    """(architecture, problem_type) -> model, the first registered where several share
    one (the package's before a task module's); problem_type None: the class's model
    whatever its problem type says (regression is the classifier's too)."""
    found = {}
    for name, cls in known.items():
        if cls.hf_architecture is not None:
            found.setdefault((cls.hf_architecture, cls.hf_problem_type), name)
    return found


def detect_model(files: release.ReleaseFiles) -> str:
    """The model (a `models()` name) that the weights of `files` fill."""
    known = models()
    if files.layout == "huggingface":
        values = huggingface.read_hf_config(files.config_file)[1]
        architectures = values.get("architectures")
        architecture = (architectures or [None])[0]
        by_class = _by_hf_class(known)
        name = by_class.get((architecture, values.get("problem_type")),
                            by_class.get((architecture, None)))
        if name is None:
            raise CheckpointError(
                f"{files.config_file} names the architectures {architectures}; give "
                f"--kind ({', '.join(known)})")
        return name
    shapes = release.weight_shapes(files)
    # The models whose every head is in the checkpoint; a head within another model's
    # (the pretraining heads hold no other) counts for the larger one.
    found = {name: cls for name, cls in known.items() if cls.heads and cls.detectable
             and all(task_heads.weights_name(head) in shapes for head in cls.heads)}
    found = {name: cls for name, cls in found.items() if not any(
        set(cls.heads) < set(other.heads) for other in found.values())}
    if not found:
        return "encoder"
    if len(found) > 1:
        raise CheckpointError(f"{files.checkpoint} holds the heads of {', '.join(found)}: "
                              "give --kind")
    name, cls = next(iter(found.items()))
    pooled = task_heads.weights_name(task_heads.CLASSIFIER)  # also the RACE scorer's
    if cls.heads == (task_heads.CLASSIFIER,) and shapes[pooled][0] == 1:
        raise CheckpointError(
            f"{files.checkpoint} has a one-output head: give --kind=classifier "
            "(regression) or --kind=multiple_choice")
    return name


def kind_given(kind: str, model: str | None, deprecated) -> str:
    """The kind `kind` names, or `model`, its deprecated former name (`--kind` and the
    `kind` keyword were `--model` and `model`: then `deprecated(model)` says so); the
    two naming two kinds are refused."""
    if model is None:
        return kind
    if kind not in ("auto", model):
        raise ValueError(f"--kind={kind} and --model={model} name two kinds: give --kind "
                         "alone")
    deprecated(model)
    return model


def _deprecated_flag(model: str) -> None:
    logging.warning("--model is deprecated: use --kind=%s (the same names)", model)


def _deprecated_keyword(model: str) -> None:
    # (stacklevel: the caller of `load` or `convert`)
    warnings.warn(f"model={model!r} is deprecated: use kind={model!r} (the same names)",
                  DeprecationWarning, stacklevel=4)


def load(path, *, kind: str = "auto", albert_config_file=None, model: str | None = None):
    """The model held by `path` (any layout), loaded strictly, and its files. `kind`:
    the serving kind whose model it is (`models()`; "auto": told from the weights);
    `model`: its deprecated former name."""
    kind = kind_given(kind, model, _deprecated_keyword)
    files = release.describe_checkpoint(path)
    if albert_config_file:
        files.config_file = os.fspath(albert_config_file)
    known = models()
    name = detect_model(files) if kind == "auto" else kind
    if name not in known:
        raise ValueError(f"--kind={name}: expected auto or one of {', '.join(known)}")
    cls, config, kwargs = known[name], files.load_config(), {}
    if cls.outputs_argument is not None:
        count = release.head_outputs(files, cls, config)
        if count is None:
            raise CheckpointError(f"{files.checkpoint} has no {name} head "
                                  f"({', '.join(cls.heads[0].variables)})")
        kwargs[cls.outputs_argument] = count
    result = cls(config, **kwargs)
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


def convert(input_path, output_dir, *, to: str = "huggingface", kind: str = "auto",
            albert_config_file=None, do_lower_case: bool | None = None,
            model: str | None = None) -> str:
    """Reads `input_path` (any layout) and writes `output_dir` in the layout `to`;
    `kind` as `load`'s (`model`: its deprecated former name)."""
    kind = kind_given(kind, model, _deprecated_keyword)
    if to not in TARGETS:
        raise ValueError(f"--to={to}: expected one of {', '.join(TARGETS)}")
    if fileio.exists(output_dir):
        raise FileExistsError(f"{output_dir} exists; not overwritten")
    result, files = load(input_path, kind=kind, albert_config_file=albert_config_file)
    logging.info("%s", result.load_report)
    spm, vocab = files.spm_model_file, None if files.spm_model_file else files.vocab_file
    if to == "google":
        return save_google(result, output_dir, spm_model_file=spm, vocab_file=vocab)
    lower = do_lower_case if do_lower_case is not None else (
        True if files.do_lower_case is None else files.do_lower_case)
    if to == "keras_hub":
        return keras_hub_preset.save_keras_hub_preset(
            result, output_dir, spm_model_file=spm, vocab_file=vocab, do_lower_case=lower)
    return huggingface.save_hf_checkpoint(result, output_dir, spm_model_file=spm,
                                          vocab_file=vocab, do_lower_case=lower)


FLAGS = flags.FLAGS


def define_flags() -> None:
    flags.DEFINE_string("input", None, "A release directory or checkpoint of any layout.")
    flags.DEFINE_string("output", None, "The directory to write (must not exist).")
    flags.DEFINE_enum("to", "huggingface", list(TARGETS), "The layout to write.")
    kinds = ["auto", *models()]
    flags.DEFINE_enum("kind", "auto", kinds, "The serving kind whose model the weights "
                      "hold (as export_savedmodel.py's --kind); auto: told from them.")
    flags.DEFINE_enum("model", None, kinds, "Deprecated: --kind (the same names).")
    flags.DEFINE_string(tasks.TASK_MODULE_FLAG, None,
                        "A task module whose models --kind may name (by their serving "
                        "kinds' names).")
    flags.DEFINE_string("albert_config_file", None,
                        "The config, where none lies beside --input.")
    flags.DEFINE_bool("do_lower_case", None, "Recorded in tokenizer_config.json "
                      "(default: the input's, else true).")


def main(argv) -> None:
    if len(argv) > 1:  # (one line: absl's app.UsageError adds the usage and every flag)
        raise SystemExit(f"error: unexpected arguments: {' '.join(argv[1:])}")
    try:
        path = convert(FLAGS.input, FLAGS.output, to=FLAGS.to,
                       kind=kind_given(FLAGS.kind, FLAGS.model, _deprecated_flag),
                       albert_config_file=FLAGS.albert_config_file,
                       do_lower_case=FLAGS.do_lower_case)
    except (ValueError, OSError) as e:  # CheckpointError, ConfigError, FileExistsError
        raise SystemExit(f"error: {e}") from None
    print(f"wrote {path}")


if __name__ == "__main__":
    # The --task_module first, so that its model is one of --kind's choices (one that
    # cannot be loaded stops the program with one line, `error: ...`).
    tasks.load_task_module_in(sys.argv[1:])
    define_flags()
    flags.mark_flags_as_required(["input", "output"])
    app.run(main)
