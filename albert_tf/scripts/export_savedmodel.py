"""Exports a fine-tuned (or pretrained) ALBERT TF1 checkpoint as a SavedModel for serving.

    python export_savedmodel.py --kind=classifier --task_name=MRPC \\
        --albert_config_file=albert_base/albert_config.json \\
        --checkpoint=mrpc_out/model.ckpt-best \\
        --spm_model_file=albert_base/30k-clean.model --max_seq_length=128 \\
        --export_dir=serving/mrpc

writes `serving/mrpc/<version>/` (1 + the largest existing version unless --version)
with the signatures `serving_default`, `serve_examples` and `serve_text`. With
`--export_tflite=mrpc.tflite` (and `--tflite_precision`) it also writes the model as one
LiteRT file, token ids in (`albert_tf.export.export_tflite`), and raw text in as well
with `--tflite_text` (the tokenizer files; one text or a pair); either flag may be
given alone. A checkpoint of a run with `--long_text=windows` (classifier, regression,
multi_label) is exported with the same `--long_text` and `--window_stride`: its
`serve_text` reads a long text in windows and pools their answers as the run did (the
LiteRT file cuts, and says so). The checkpoint must hold every variable of the model
(a mismatch stops before anything is written).

`--kind=encoder` (and `mlm`) exports are also TF Hub Reusable SavedModels that
`hub.KerasLayer(path, trainable=True)` fine-tunes. Their text preprocessor, another
SavedModel (`tokenize`, `bert_pack_inputs`; the default length is --max_seq_length), is
written with `--kind=preprocessor` (no --checkpoint: the tokenizer flags, and
--albert_config_file for the longest length, else 512) or beside an export with
`--export_preprocessor=DIR` (`albert_tf.export.reusable`).
`--albert_config_file`, `--spm_model_file`, `--vocab_file` and `--do_lower_case` are
the run_* scripts' flags (`albert_tf.tasks.options.ModelFileOptions`): a shipped config name such as
`albert_base_v2` works here as there. `--checkpoint` may also be brightmart's
albert_zh checkpoint, a Hugging Face directory or a release directory of any layout,
whose config and tokenizer files are used where those flags are not given. The work is
`albert_tf.export`.

Nothing written is ever replaced: an existing version (--version), an existing
--export_tflite file, an --export_dir or --export_preprocessor that is a file, and a
--max_seq_length given beyond the config's max_position_embeddings (left at its
default, it is cut to them) stop with a one-line error before any work.
"""

import inspect
import sys

from absl import app, flags

from albert_tf import packing, tasks
from albert_tf.apps import labels as labels_file
from albert_tf.apps import model_files, runner
from albert_tf.apps import options as option_flags
from albert_tf.data.choice_records import DEFAULT_MAX_QA_LENGTH
from albert_tf.errors import UsageError
from albert_tf.export import SERVING_PRECISIONS
from albert_tf.tasks.classification import ClassificationTask
from albert_tf.tasks.options import (
    FineTuningOptions,
    LiteRTOptions,
    ModelFileOptions,
    RunOptions,
)

FLAGS = flags.FLAGS

# The --task_module first, so that its serving kinds are among --kind's choices (one
# that cannot be loaded stops the program with one line).
TASK = tasks.load_task_module_in(sys.argv[1:])
PREPROCESSOR = "preprocessor"
PREPROCESSOR_LONGEST = 512  # --kind=preprocessor without a config: BERT's positions
flags.DEFINE_enum("kind", None, [*tasks.serving_kinds(), PREPROCESSOR],
                  "The model to export (a serving kind: the encoder's, or a task's), or "
                  "the text preprocessor alone. Default: --task_module's.")
flags.DEFINE_string(tasks.TASK_MODULE_FLAG, None,
                    "A task of your own (the Python file run_classifier.py trained it "
                    "with): its serving kind is the default --kind, its export_options() "
                    "the export's, its options are added to these flags.")
option_flags.define_flags(ModelFileOptions)  # albert_config_file, spm_model_file, ...
flags.DEFINE_string("checkpoint", None,
                    "TF1 name-based checkpoint (e.g. run_classifier's model.ckpt-best, "
                    "brightmart's albert_model.ckpt), a Hugging Face directory, or a "
                    "release directory.")
flags.DEFINE_integer("max_seq_length", 512,
                     "Longest packed input of serve_text (the LiteRT file's and the "
                     "preprocessor's default length too). Left at its default, it is cut "
                     "to the model's max_position_embeddings; a value given beyond them "
                     "is refused.")
flags.DEFINE_integer("max_query_length", 64, "Longest SQuAD question (serve_text).")
flags.DEFINE_integer("max_qa_length", DEFAULT_MAX_QA_LENGTH,
                     "Multiple choice (serve_text): the last pieces of question + option "
                     "kept, as run_classifier.py's RACE records.")
flags.DEFINE_string("task_name", None,
                    "The GLUE task the model was fine-tuned on: gives the labels and "
                    "whether serve_text takes a pair.")
flags.DEFINE_integer("num_labels", None,
                     "The model's outputs (default: those of the checkpoint's head; a "
                     "classifier with 1 is a regression).")
flags.DEFINE_integer("num_choices", 4, "Choices of a multiple-choice model (RACE: 4).")
flags.DEFINE_string("labels", None,
                    "Comma-separated labels, one per output (default: the GLUE "
                    "--task_name's; for a run of yours, the labels.txt beside its "
                    "checkpoints).")
flags.DEFINE_float("threshold", None,
                   "multi_label: the probability from which a label is predicted "
                   "(default: the threshold.txt beside --checkpoint, else 0.5).")
flags.DEFINE_enum("word_split", "whitespace", ["whitespace", "characters"],
                  "token_classifier: how serve_text cuts raw text into words, as the "
                  "training data's (run_ner.py: characters for CLUENER and other "
                  "one-character-per-word files).")
flags.DEFINE_string("export_dir", None, "Where the SavedModel's version directories go.")
flags.DEFINE_string("export_preprocessor", None,
                    "Where the version directories of the model's TF Hub text "
                    "preprocessor go (beside an encoder export, for hub.KerasLayer).")
option_flags.define_flags(LiteRTOptions)  # export_tflite, tflite_precision, tflite_text
flags.DEFINE_integer("version", None, "Version to write (default: the next one).")
# run_classifier.py's flags of the windows (classifier, regression, multi_label).
option_flags.define_flags(ClassificationTask.Options, only=("long_text", "window_stride"),
                          helps={"long_text": (
                              "classifier, regression, multi_label: how serve_text "
                              "reads a text longer than --max_seq_length, as the run "
                              "that trained the checkpoint read it. truncate: cut. "
                              "windows: whole, in windows every --window_stride "
                              "pieces, its answer pooled over them as the run pools "
                              "them (the LiteRT file still cuts).")})
if TASK is not None:
    # The task's options beyond a run's, for its export_options() (a name this script
    # has for another value stays this script's).
    option_flags.define_flags(TASK.Options, omit=FineTuningOptions.names(),
                              keep_others=True)
flags.DEFINE_enum("serving_precision", "float32", list(SERVING_PRECISIONS),
                  "What the SavedModel computes in: bfloat16 runs its matmuls in bfloat16 "
                  "(for CPUs with AVX512_BF16 or AMX), LayerNorm, softmax and outputs in "
                  "float32; export_info.json records it.")


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
    from albert_tf.export import export_savedmodel, export_tflite, load_model_from_checkpoint
    from albert_tf.export.savedmodel import check_windows_kind

    if FLAGS.kind == PREPROCESSOR:
        return export_preprocessor_only()
    kind = _kind()
    if not (FLAGS.export_dir or FLAGS.export_tflite or FLAGS.export_preprocessor):
        raise app.UsageError("give --export_dir (a SavedModel), --export_tflite (a LiteRT "
                             "file), --export_preprocessor or several")
    if not FLAGS.checkpoint:
        raise app.UsageError(f"--kind={kind.name} needs --checkpoint")
    try:
        # A release directory brings its config and tokenizer files.
        files = _model_files(FLAGS.checkpoint)
        if FLAGS.export_preprocessor:
            _check_tokenizer_files(files)
        _check_exports(files)
        options = _export_options(kind)
        check_windows_kind(kind, options.get("long_text"))
        config = model_files.load_config(files.albert_config_file)
        max_seq_length = export_max_seq_length(
            config.max_position_embeddings,
            _positions_of(config.max_position_embeddings, files.albert_config_file))
        # Strict: a checkpoint that lacks any variable stops before anything is written.
        # (The number of outputs, where not given, is the checkpoint head's; the
        # checkpoint described once, by `_model_files`.)
        model = load_model_from_checkpoint(kind, config, files.init_files,
                                           num_labels=FLAGS.num_labels,
                                           num_choices=FLAGS.num_choices,
                                           **_given_model_arguments(kind))
        # --labels, else a GLUE --task_name's, else the labels.txt a run kept beside its
        # checkpoints.
        if FLAGS.labels:
            labels = FLAGS.labels.split(",")
        elif FLAGS.task_name:
            labels = None  # (export_savedmodel takes them from the task)
        else:
            labels = labels_file.saved_labels(FLAGS.checkpoint)
        written = []
        if FLAGS.export_dir:
            written.append(export_savedmodel(
                model, FLAGS.export_dir, kind=kind,
                spm_model_file=files.spm_model_file, vocab_file=files.vocab_file,
                do_lower_case=files.do_lower_case, max_seq_length=max_seq_length,
                labels=labels, version=FLAGS.version,
                serving_precision=FLAGS.serving_precision, **options))
        if FLAGS.export_tflite:
            written.append(export_tflite(
                model, FLAGS.export_tflite, kind=kind,
                precision=FLAGS.tflite_precision, labels=labels,
                task_name=options.get("task_name"), is_pair=options.get("is_pair"),
                long_text=options.get("long_text"),
                max_seq_length=max_seq_length, do_lower_case=files.do_lower_case,
                with_text=FLAGS.tflite_text,
                spm_model_file=files.spm_model_file, vocab_file=files.vocab_file))
        if FLAGS.export_preprocessor:
            written.append(_export_preprocessor(files, FLAGS.export_preprocessor,
                                                max_seq_length,
                                                config.max_position_embeddings))
    except (ValueError, OSError, KeyError) as e:  # CheckpointError, ConfigError, ExportError
        raise SystemExit(f"error: {e}") from None
    for path in written:
        print(f"exported {path}")


def _task():
    """The --task_module's task, or None."""
    return tasks.load_task_module(FLAGS.task_module) if FLAGS.task_module else None


def _kind():
    """The `ServingKind` to export: --kind's, else the --task_module's first."""
    task = _task()
    if FLAGS.kind is None:
        if task is None:
            raise app.UsageError("give --kind (or --task_module: its serving kind)")
        return task.serving_kinds[0]
    return tasks.serving_kinds()[FLAGS.kind]


# The model arguments an export takes from its flags where given, beside num_labels
# and num_choices (multi-label's threshold), for models whose constructor has them.
_MODEL_ARGUMENT_FLAGS = ("threshold",)


def _given_model_arguments(kind) -> dict:
    accepted = inspect.signature(kind.model_class.__init__).parameters
    given = {}
    for name in _MODEL_ARGUMENT_FLAGS:
        if FLAGS[name].value is None:
            continue
        if name not in accepted:
            raise app.UsageError(f"--{name}: the {kind.name} model takes no {name}")
        given[name] = FLAGS[name].value
    return given


def _export_options(kind) -> dict:
    """What the export takes beside the model: the flags (the labels of a GLUE
    --task_name, SQuAD's --max_query_length, multiple choice's --max_qa_length, NER's
    --word_split), and what the --task_module's task says (`Task.export_options`, the
    task made from these flags: its options beyond a run's, and those of a run this
    script has, such as --task_name)."""
    options = {"task_name": FLAGS.task_name, "max_query_length": FLAGS.max_query_length,
               "max_qa_length": FLAGS.max_qa_length, "word_split": FLAGS.word_split}
    if FLAGS.long_text != packing.TRUNCATE or FLAGS.window_stride is not None:
        options.update(long_text=FLAGS.long_text, window_stride=FLAGS.window_stride)
    task = _task()
    if task is not None:  # its options: the flags here, else their defaults
        options.update(task(task.Options.build(option_flags.flag_values(
            task.Options))).export_options())
    return options


def _model_files(checkpoint) -> RunOptions:
    """The model file flags and the exports, completed from a release directory
    `checkpoint` brings (as a run's --init_checkpoint)."""
    return model_files.complete_model_files(RunOptions.build(
        option_flags.flag_values(ModelFileOptions), **option_flags.flag_values(
            LiteRTOptions), init_checkpoint=checkpoint, export_dir=FLAGS.export_dir))


def _check_tokenizer_files(files) -> None:
    """Before anything is written: the preprocessor needs the model's tokenizer."""
    if not (files.spm_model_file or files.vocab_file):
        raise app.UsageError("the preprocessor needs --spm_model_file or --vocab_file "
                             "(or a release directory that has one)")


def export_max_seq_length(longest: int, limit: str) -> int:
    """The one rule of --max_seq_length for every export of a run (the SavedModel, the
    LiteRT file, the preprocessor's default length): left at its default, it is cut to
    `longest`, the model's max_position_embeddings; a value given beyond it is refused
    before any work, `limit` saying what that limit is and where it comes from."""
    if not FLAGS["max_seq_length"].present:
        return min(FLAGS.max_seq_length, longest)
    if FLAGS.max_seq_length > longest:
        raise UsageError(f"--max_seq_length={FLAGS.max_seq_length} is longer than "
                         f"{limit}")
    return FLAGS.max_seq_length


def _positions_of(longest: int, config_file) -> str:
    return f"the model's max_position_embeddings ({longest}) in {config_file}"


def _check_exports(files) -> None:
    """Where the exports go (a new version directory, a new LiteRT file) and what they
    need, checked before any work (`session.check_exports`)."""
    from albert_tf.apps.session import check_exports

    check_exports(files, None if FLAGS.kind == PREPROCESSOR else _kind(),
                  export_preprocessor=FLAGS.export_preprocessor, version=FLAGS.version)


def _export_preprocessor(files, export_dir, seq_length: int, longest: int) -> str:
    from albert_tf.export import export_preprocessor

    return export_preprocessor(
        export_dir, spm_model_file=files.spm_model_file, vocab_file=files.vocab_file,
        do_lower_case=files.do_lower_case, seq_length=seq_length,
        max_seq_length=longest, version=FLAGS.version)


def export_preprocessor_only() -> None:
    """--kind=preprocessor: the tokenizer flags (and the config's longest length)."""
    if FLAGS.checkpoint or FLAGS.export_tflite or FLAGS.export_preprocessor:
        raise app.UsageError("--kind=preprocessor takes --export_dir and the tokenizer "
                             "flags (no --checkpoint, --export_tflite or "
                             "--export_preprocessor)")
    if not FLAGS.export_dir:
        raise app.UsageError("--kind=preprocessor needs --export_dir")
    try:
        files = _model_files(None)
        _check_tokenizer_files(files)
        _check_exports(files)
        if files.albert_config_file:
            longest = model_files.load_config(files.albert_config_file).max_position_embeddings
            limit = _positions_of(longest, files.albert_config_file)
        else:
            longest = PREPROCESSOR_LONGEST
            limit = (f"{longest}, the longest the preprocessor packs without "
                     "--albert_config_file (give the model's config: its "
                     "max_position_embeddings)")
        seq_length = export_max_seq_length(longest, limit)
        path = _export_preprocessor(files, FLAGS.export_dir, seq_length, longest)
    except (ValueError, OSError) as e:  # ConfigError, ExportError, TokenizerError
        raise SystemExit(f"error: {e}") from None
    print(f"exported {path}")


def run():
    """The program (`python export_savedmodel.py` and the installed `albert-export`)."""
    runner.program(main, __doc__, required=())


if __name__ == "__main__":
    run()
