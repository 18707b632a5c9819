"""The model's files: the config a run reads (`load_config`: a shipped name or a file),
what `--init_checkpoint` brings beside its weights (`complete_model_files`: their
layout, the config and tokenizer files of a release directory, `do_lower_case`), and
what a training run keeps beside its checkpoints so that its output directory is such a
release directory itself (`save_model_files`).
"""

from __future__ import annotations

import os

import tensorflow as tf
from absl import logging

from albert_tf import fileio
from albert_tf.checkpoints import release
from albert_tf.config import AlbertConfig
from albert_tf.errors import UsageError
from albert_tf.export.base import describe_export
from albert_tf.tasks.options import RunOptions

# What a training run writes beside its checkpoints (`save_model_files`).
RUN_CONFIG = "albert_config.json"
RUN_VOCAB = "vocab.txt"


def load_config(albert_config_file, checkpoint_layout: str = "google") -> AlbertConfig:
    """`--albert_config_file`: a shipped config name (`albert_base_v2`, ...) or the path
    of an albert_config.json (or a Hugging Face config.json); the error for neither
    lists the shipped names. For brightmart weights (`checkpoint_layout`), the
    Google-layout equivalent of the config."""
    if not albert_config_file:
        raise UsageError("--albert_config_file is required")
    return release.layout_config(AlbertConfig.from_name_or_file(albert_config_file),
                                 checkpoint_layout)


def check_length(max_seq_length: int, config: AlbertConfig, whose: str,
                 where: str = "") -> None:
    """--max_seq_length within the positions of a model (`whose` and `where` name it
    in the message)."""
    if max_seq_length > config.max_position_embeddings:
        raise UsageError(
            f"--max_seq_length={max_seq_length} is longer than {whose} "
            f"max_position_embeddings ({config.max_position_embeddings}){where}")


def complete_model_files(options: RunOptions) -> RunOptions:
    """The options with what `--init_checkpoint` brings: its description
    (`init_files`, a `release.ReleaseFiles`: the layout of its weights, read once and
    used by the config and the load), and the config and tokenizer files found beside
    them where the options give none (a release directory of any layout),
    `do_lower_case` too. A copy, checked before any work starts."""
    options = _teacher_files(options)
    if not options.init_checkpoint:
        return options.replace(
            do_lower_case=True if options.do_lower_case is None else options.do_lower_case)
    files = release.describe_checkpoint(options.init_checkpoint)
    changes = {"init_files": files}
    if not options.albert_config_file:
        if files.config_file is None:
            raise UsageError(
                f"--albert_config_file is required: there is no config beside "
                f"--init_checkpoint={options.init_checkpoint}")
        changes["albert_config_file"] = files.config_file
        logging.info("config: %s", files.config_file)
    if not (options.spm_model_file or options.vocab_file):
        if files.spm_model_file:
            changes["spm_model_file"] = files.spm_model_file
        elif files.vocab_file:
            changes["vocab_file"] = files.vocab_file
        logging.info("tokenizer: %s", files.spm_model_file or files.vocab_file)
    said, given = files.do_lower_case, options.do_lower_case
    if given is None:
        changes["do_lower_case"] = True if said is None else said
    elif said is not None and given != said:
        logging.warning("--do_lower_case=%s, but %s says do_lower_case=%s", given,
                        files.directory, said)
    return options.replace(**changes)


# The flags that make the student of the teacher's own weights: fewer layer passes,
# fewer groups, narrower FFNs (`distillation.student_config`).
STUDENT_SHAPE = ("student_num_hidden_layers", "student_num_hidden_groups",
                 "student_intermediate_size")


def student_shape(options) -> dict[str, int]:
    """The STUDENT_SHAPE flags given, by name without `student_` (the keywords of
    `distillation.student_config`); empty where the student is not the teacher's."""
    given = {"num_hidden_layers": options.student_num_hidden_layers,
             "num_hidden_groups": options.student_num_hidden_groups,
             "intermediate_size": options.student_intermediate_size}
    return {name: value for name, value in given.items() if value}


def _student_flags(shape: dict[str, int]) -> str:
    """The flags of `student_shape`'s result, as given."""
    return " ".join(f"--student_{name}={value}" for name, value in shape.items())


def _teacher_files(options: RunOptions) -> RunOptions:
    """With --teacher_checkpoint: its description (`teacher_files`) and its config
    (`teacher_config_file`, from beside it where not given). A student made of the
    teacher's weights (STUDENT_SHAPE) takes the teacher's files as its
    --init_checkpoint brings them (config and tokenizer), which it may not give itself."""
    teacher = options.teacher_checkpoint
    student = student_shape(options)
    if not teacher:
        if student:
            raise UsageError(f"{_student_flags(student)}: a student of "
                             "--teacher_checkpoint's weights, which is not given")
        return options
    files = describe_export(teacher) or release.describe_checkpoint(teacher)
    if files.layout == release.SAVEDMODEL and student:
        raise UsageError(
            f"--teacher_checkpoint={teacher} is a SavedModel export, whose weights a "
            "student cannot start from: give the student's own "
            f"--albert_config_file (and --init_checkpoint) instead of {_student_flags(student)}")
    config_file = options.teacher_config_file or files.config_file
    if config_file is None:
        raise UsageError(f"--teacher_config_file is required: there is no config beside "
                         f"--teacher_checkpoint={teacher}")
    changes = {"teacher_files": files, "teacher_config_file": config_file}
    if student:
        given = [flag for flag, value in (("--init_checkpoint", options.init_checkpoint),
                                          ("--albert_config_file",
                                           options.albert_config_file)) if value]
        if given:
            raise UsageError(
                f"{_student_flags(student)} starts the student from the teacher's "
                f"weights and config; {' and '.join(given)} cannot be given with it")
        changes["albert_config_file"] = config_file
        if not (options.spm_model_file or options.vocab_file):
            changes["spm_model_file"] = files.spm_model_file
            changes["vocab_file"] = None if files.spm_model_file else files.vocab_file
        if options.do_lower_case is None and files.do_lower_case is not None:
            changes["do_lower_case"] = files.do_lower_case
    return options.replace(**changes)


def save_model_files(options, output_dir: str, config: AlbertConfig) -> None:
    """A training run's config (`albert_config.json`) and a copy of its tokenizer file
    (the SentencePiece model under its name, a WordPiece vocabulary as `vocab.txt`)
    beside its checkpoints, each written atomically unless there: the output directory
    is then a release directory that `--init_checkpoint` and `--teacher_checkpoint`
    read without more flags. (`do_lower_case` is not kept: such a directory reads as
    lowercased unless the flag says otherwise, as Google's do.)"""
    if not options.do_train:
        return
    path = os.path.join(output_dir, RUN_CONFIG)
    if not tf.io.gfile.exists(path):
        fileio.write_text_atomically(path, config.to_json_string())
    spm, vocab = options.spm_model_file, options.vocab_file
    if spm or vocab:
        name = os.path.basename(spm) if spm else RUN_VOCAB
        if spm and not name.endswith(".model"):
            name += ".model"
        path = os.path.join(output_dir, name)
        if not tf.io.gfile.exists(path):
            fileio.write_bytes_atomically(path, fileio.read_bytes(spm or vocab))
