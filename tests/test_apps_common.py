"""What the scripts share (`albert_tf.apps.options`, `model_files`, `labels`): each
script's flags made from its tasks' options, the model flags every script takes the same
way, the files --init_checkpoint brings, labels.txt; and the options themselves
(`albert_tf.tasks.options`), typed and checked with no flag at all."""

import dataclasses

import pytest
from conftest import FIXTURE_CHECKPOINT

from albert_tf.config import available_configs
from albert_tf.tasks.options import RunOptions, TaskOptions
from tests.helpers.forked import run_python
from tests.helpers.scripts import FIXTURES, ROOT, SPM, run_script

MODEL_FLAGS = {
    "albert_config_file", "init_checkpoint", "output_dir", "spm_model_file", "vocab_file",
    "do_lower_case", "do_train", "do_eval", "learning_rate", "optimizer",
    "save_checkpoints_steps", "keep_checkpoint_max", "iterations_per_loop",
    "distribution_strategy", "tpu", "num_gpus", "intra_op_threads", "inter_op_threads",
    "heartbeat_timeout", "precision", "enable_xla",
    "gradient_accumulation_steps", "seed", "recompute", "recompute_unit", "export_dir",
    "serving_precision", "export_tflite", "tflite_precision", "tflite_text",
    "export_hf_dir"}
# The flags of each script, as when the lists were written by hand (run_squad.py has
# --task_name and --cached_dir since every run script has them).
# The fine-tuning scripts' distillation flags (a task that does not distil refuses them).
DISTILL_FLAGS = {"teacher_checkpoint", "teacher_config_file", "distill_temperature",
                 "distill_alpha", "student_num_hidden_layers", "student_num_hidden_groups",
                 "student_intermediate_size",
                 "transfer_file", "student_teacher_groups", "distill_hidden_weight",
                 "distill_attention_weight", "distill_hidden_layers", "distill_augment",
                 "distill_augment_probability", "distill_augment_neighbours"}
APP_FLAGS = {
    "classifier": {
        "do_predict", "data_dir", "task_name", "cached_dir", "max_seq_length",
        "max_qa_length", "high_only", "middle_only", "train_batch_size", "eval_batch_size",
        "predict_batch_size", "train_step", "warmup_step", "dropout_prob",
        "num_train_epochs", "warmup_proportion",
        # Multiple choice and classification from your own files.
        "train_file", "dev_file", "test_file", "text_a_field", "text_b_field",
        "label_field", "labels", "header",
        # Long texts in windows (classification, regression, multi-label, multiple
        # choice).
        "long_text", "window_stride", "window_weight", "max_windows_per_text",
        # Your own task in a file, and the built-in task modules' flags (multi_label).
        "task_module", "label_separator", "threshold", "tune_threshold",
        "max_skipped_rows",
        # SQuAD's, since --task_name picks any fine-tuning task.
        "predict_file", "train_feature_file", "predict_feature_file",
        "version_2_with_negative", "doc_stride", "max_query_length", "n_best_size",
        "max_answer_length", "start_n_top", "end_n_top", "null_score_diff_threshold",
        # LoRA (every fine-tuning script).
        "lora_rank", "lora_ffn", *DISTILL_FLAGS},
    "ner": {
        "do_predict", "data_dir", "task_name", "train_file", "dev_file", "test_file",
        "labels", "cached_dir", "max_seq_length", "train_batch_size", "eval_batch_size",
        "predict_batch_size", "train_step", "num_train_epochs", "warmup_step",
        "warmup_proportion", "dropout_prob", "max_skipped_rows", "task_module",
        "lora_rank", "lora_ffn", *DISTILL_FLAGS},
    "squad": {
        "task_name", "cached_dir", "do_predict", "train_file", "predict_file", "train_feature_file",
        "predict_feature_file", "version_2_with_negative", "max_seq_length", "doc_stride",
        "max_query_length", "train_batch_size", "predict_batch_size", "num_train_epochs",
        "warmup_proportion", "n_best_size", "max_answer_length", "start_n_top", "end_n_top",
        "null_score_diff_threshold", "max_skipped_rows", "task_module", "lora_rank",
        "lora_ffn", *DISTILL_FLAGS},
    "pretraining": {
        "input_file", "input_text", "max_seq_length", "max_predictions_per_seq",
        "train_batch_size", "eval_batch_size", "num_train_steps", "num_warmup_steps",
        "start_warmup_step", "poly_power", "max_eval_steps", "masked_lm_prob", "ngram",
        "short_seq_prob", "max_skipped_rows",
        # Every run has the LoRA and distillation groups; pretraining refuses them.
        "lora_rank", "lora_ffn", *DISTILL_FLAGS},
}


def python(code: str) -> str:
    result = run_python(["-c", code], timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def test_each_script_has_its_tasks_options_as_flags():
    # One process per app: their flags share names (max_seq_length, ...), as the
    # scripts, each of which defines one app's flags. Each flag is an option of the
    # script's task, filled back from the parsed flags with the value given.
    for app, own in APP_FLAGS.items():
        out = python(
            "import sys\n"
            "from absl import flags\n"
            f"from albert_tf.apps import {app}\n"
            f"{app}.define_flags()\n"
            f"task = {['--task_name=mrpc'] if app == 'classifier' else []}\n"
            "flags.FLAGS(['x', '--seed=7', *task])\n"
            "names = [f.name for module, defined in "
            "flags.FLAGS.flags_by_module_dict().items() if module.startswith('albert_tf.')"
            " for f in defined]\n"
            f"options = {app}.options_from_flags()\n"
            "print(type(options).__qualname__, options.seed, *names)\n").split()
        assert out[1] == "7", app
        names = out[2:]
        assert len(names) == len(set(names)), app
        assert set(names) == MODEL_FLAGS | own, app
        assert out[0] == {"classifier": "ClassificationTask.Options",
                          "ner": "TokenClassificationTask.Options",
                          "squad": "SquadTask.Options",
                          "pretraining": "PretrainingTask.Options"}[app]


def test_export_takes_the_model_flags_of_the_run_scripts():
    out = python("import sys; sys.argv = ['export_savedmodel.py']\n"
                 "import runpy; runpy.run_path('export_savedmodel.py')\n"
                 "from absl import flags\n"
                 "from albert_tf.tasks.options import RunOptions\n"
                 "mine = [f for f in flags.FLAGS.get_flags_for_module("
                 "'albert_tf.apps.options')]\n"
                 "print(*(f.name for f in mine))\n"
                 "print(all(f.help.endswith(RunOptions.help_of(f.name)) for f in mine))\n")
    assert out.split() == ["albert_config_file", "spm_model_file", "vocab_file",
                           "do_lower_case", "export_tflite", "tflite_precision",
                           "tflite_text", "long_text", "window_stride", "True"]


def test_export_resolves_a_shipped_config_name(tmp_path):
    # albert_base_v2 is built (vocabulary 30000, embeddings 128) and then refused by
    # the tiny fixture checkpoint: the name was resolved as run_classifier.py does.
    result = run_script("export_savedmodel.py", "--kind=encoder",
                        "--albert_config_file=albert_base_v2",
                        f"--checkpoint={FIXTURE_CHECKPOINT}",
                        f"--export_dir={tmp_path / 'serving'}", check=False)
    assert result.returncode != 0
    assert "does not fit" in result.stderr
    assert "bert/embeddings/word_embeddings: model [30000, 128], checkpoint [211, " \
        in result.stderr
    assert not (tmp_path / "serving").exists()


@pytest.mark.parametrize("script, args", [
    ("export_savedmodel.py", ["--kind=encoder", f"--checkpoint={FIXTURE_CHECKPOINT}",
                              "--export_dir={tmp}/serving"]),
    ("run_classifier.py", ["--task_name=MRPC", f"--data_dir={FIXTURES / 'glue'}",
                           "--do_train", f"--spm_model_file={SPM}", "--output_dir={tmp}"]),
])
def test_an_unknown_config_name_lists_the_shipped_ones(tmp_path, script, args):
    result = run_script(script, "--albert_config_file=albert_bsae_v2",
                        *(a.replace("{tmp}", str(tmp_path)) for a in args), check=False)
    assert result.returncode != 0
    assert ("error: albert config file albert_bsae_v2 does not exist, and it is not the "
            f"name of a shipped config either ({', '.join(available_configs())})"
            ) in result.stderr


# ------------------------------------------------------- --init_checkpoint of any layout
def test_init_checkpoint_directory_brings_its_files(tmp_path):
    from albert_tf.apps.model_files import complete_model_files, load_config
    from albert_tf.checkpoints.release import describe_checkpoint
    from tests.helpers.layouts import brightmart_release, hf_release

    hf = hf_release(tmp_path / "hf", tokenizer="wordpiece")  # do_lower_case false
    options = complete_model_files(RunOptions(init_checkpoint=str(hf)))
    assert (options.init_files.layout, options.albert_config_file, options.spm_model_file,
            options.vocab_file, options.do_lower_case) == (
        "huggingface", str(hf / "config.json"), None, str(hf / "vocab.txt"), False)
    # Given, the flag wins; without --init_checkpoint, the original's default.
    assert complete_model_files(options.replace(do_lower_case=True)).do_lower_case is True
    assert complete_model_files(RunOptions()) == RunOptions(do_lower_case=True)
    zh = brightmart_release(tmp_path / "zh")
    given = RunOptions(init_checkpoint=str(zh / "albert_model.ckpt"),
                       albert_config_file="albert_base_zh", vocab_file="my_vocab.txt")
    options = complete_model_files(given)
    # The flags given win; the layout decides how the config is read. The checkpoint
    # is described once, and that description travels with the options.
    assert options == given.replace(do_lower_case=True, init_files=describe_checkpoint(
        given.init_checkpoint))
    config = load_config(options.albert_config_file, options.init_files.layout)
    assert config.embedding_size == config.hidden_size == 768
    options = complete_model_files(given.replace(albert_config_file=None, vocab_file=None))
    assert options.albert_config_file == str(zh / "albert_config_tiny.json")
    assert options.vocab_file == str(zh / "vocab.txt")


def test_init_checkpoint_without_config_beside_it(tmp_path):
    from albert_tf.apps.model_files import complete_model_files
    from albert_tf.errors import UsageError
    from tests.test_checkpoints import copy_checkpoint

    prefix = copy_checkpoint(tmp_path / "bare")
    with pytest.raises(UsageError, match="--albert_config_file is required: there "
                       f"is no config beside --init_checkpoint={prefix}"):
        complete_model_files(RunOptions(init_checkpoint=prefix))


def test_labels_are_saved_once_and_other_labels_refused(tmp_path):
    """labels.txt: written by the first training run, read by later runs (without
    looking at the data), a training run with other labels refused."""
    from albert_tf.apps.labels import resolve_labels, save_labels
    from albert_tf.errors import UsageError

    training = TaskOptions(do_train=True)
    first = resolve_labels(training, str(tmp_path), lambda: ["O", "B-X", "I-X"])
    assert not (tmp_path / "labels.txt").exists()  # kept once the data is checked
    save_labels(training, str(tmp_path), first)
    assert (tmp_path / "labels.txt").read_text() == "O\nB-X\nI-X\n"
    later = resolve_labels(TaskOptions(), str(tmp_path),
                           lambda: pytest.fail("the saved labels are used"))
    assert later == first
    with pytest.raises(UsageError, match="holds other labels"):
        resolve_labels(TaskOptions(labels=["O", "B-Y"], do_train=True), str(tmp_path),
                       lambda: [])
    with pytest.raises(UsageError, match="distinct"):
        resolve_labels(TaskOptions(labels=["O", "O"]), str(tmp_path / "x"),
                       lambda: [])


def test_options_are_typed_and_name_what_is_wrong_before_any_work():
    """A run's options are its task's frozen dataclass, made from Python with no flag:
    an unknown option (with the closest name), a wrong type, a value outside its
    choices and two options that exclude each other are named; those left out take
    their defaults (the original script's); a list is kept as a tuple."""
    from albert_tf.tasks.classification import ClassificationTask
    from albert_tf.tasks.multiple_choice import MultipleChoiceTask
    from albert_tf.tasks.options import OptionsError

    def error(cls, values):
        with pytest.raises(OptionsError) as e:
            cls.build(values)
        return str(e.value)

    options = ClassificationTask.Options
    assert error(options, {"task_name": "mrpc", "max_seq_lenght": 64}) == (
        "unknown option(s) of ClassificationTask.Options: max_seq_lenght (did you mean "
        "max_seq_length?)")
    assert error(options, {"max_seq_length": "64"}) == \
        "--max_seq_length='64': expected an integer"
    assert error(options, {"do_train": 1}) == "--do_train=1: expected true or false"
    assert error(options, {"precision": "float64"}) == (
        "--precision='float64': expected one of float32, mixed_bfloat16, mixed_float16")
    assert error(MultipleChoiceTask.Options, {"high_only": True, "middle_only": True}) \
        == "--high_only and --middle_only exclude each other"
    typed = options.build({"task_name": "mrpc", "train_step": 3, "labels": ["a", "b"],
                           "learning_rate": 1})
    assert (typed.train_step, typed.max_seq_length, typed.warmup_step, typed.init_files,
            typed.labels, typed.learning_rate) == (3, 512, 0, None, ("a", "b"), 1.0)
    assert isinstance(typed.learning_rate, float)
    with pytest.raises(dataclasses.FrozenInstanceError):
        typed.train_step = 4
    assert (typed.replace(train_step=5).train_step, typed.train_step) == (5, 3)
    with pytest.raises(OptionsError, match="expected an integer"):
        typed.replace(train_step=5.5)
    assert {name: options.type_of(name) for name in (
        "train_step", "learning_rate", "do_train", "labels", "task_name")} == {
        "train_step": (int, True), "learning_rate": (float, False),
        "do_train": (bool, False), "labels": (tuple, True), "task_name": (str, True)}


# Each script's process: its flags defined, then for each task it runs the options a run
# with no flag but the task's name (and --output_dir) gets, against the task's Options
# built from Python with the same two; and each flag's shown default against the field's.
DEFAULTS_CHECK = """
import json, re, sys
from absl import flags
from albert_tf import tasks
from albert_tf.apps import {app} as app
sys.argv = ["x", *{argv!r}]
app.define_flags()
results = []
for task in ({tasks}):
    flags.FLAGS.unparse_flags()
    flags.FLAGS(["x", "--output_dir=out", *([f"--task_name={{task.name}}"]
                                           if "task_name" in flags.FLAGS else [])])
    from_cli = app.options_from_flags()
    from_python = task.Options.build(output_dir="out", **(
        {{"task_name": task.name}} if "task_name" in task.Options.names() else {{}}))
    differ = [name for name in task.Options.names()
              if getattr(from_cli, name) != getattr(from_python, name)]
    shown_wrong = []
    for field in task.Options.flag_fields():
        if field.name not in flags.FLAGS:
            continue
        flag = flags.FLAGS[field.name]
        default = list(field.default) if isinstance(field.default, tuple) else field.default
        if flag.default == default:
            continue
        shown = ("none" if field.default is None else str(field.default).lower()
                 if isinstance(field.default, bool) else str(field.default))
        if flag.default is not None or not re.search(
                rf"Default by task:.*\\b{{re.escape(shown)}} \\([^)]*\\b{{task.name}}\\b",
                flag.help):
            shown_wrong.append(field.name)
    results.append([task.name, type(from_cli).__qualname__, differ, shown_wrong])
print(json.dumps(results))
"""


@pytest.mark.parametrize("app, argv, task_list", [
    ("classifier", [f"--task_module={FIXTURES / 'task_modules' / 'rating.py'}"],
     "*tasks.fine_tuning(),"),
    ("ner", [], "tasks.find('ner'),"),
    ("squad", [], "tasks.find('squad'),"),
    ("pretraining", [], "tasks.find('pretraining'),"),
])
def test_a_script_run_and_a_python_run_get_the_same_defaults(app, argv, task_list):
    # Each default is defined once, by the task's options: a flag shows it (a flag
    # whose tasks' defaults differ shows none and names each task's in its help), and a
    # script run given no value takes it, as a Python run does (run_classifier.py once
    # gave every task GLUE's 1,000 steps, where a task file's options said 3 epochs).
    import json

    results = json.loads(python(DEFAULTS_CHECK.format(app=app, argv=argv,
                                                      tasks=task_list)).splitlines()[-1])
    names = [name for name, *_ in results]
    assert len(names) >= {"classifier": 6}.get(app, 1), names
    if app == "classifier":
        assert {"classification", "multiple_choice", "multi_label", "ner", "squad",
                "rating"} <= set(names)
    for name, options_class, differ, shown_wrong in results:
        assert options_class.endswith("Options"), name
        assert differ == [], (app, name)
        assert shown_wrong == [], (app, name)


@pytest.mark.parametrize("given, words", [
    ({"teacher_checkpoint": "teacher"}, "--teacher_checkpoint: the task 'pretraining' is "
                                        "not distilled here"),
    ({"distill_alpha": 0.9, "transfer_file": "more.txt"},
     "--distill_alpha, --transfer_file: the task 'pretraining' is not distilled here"),
    ({"lora_rank": 4}, "--lora_rank, --lora_ffn: run_pretraining.py trains every weight"),
])
def test_pretraining_refuses_the_groups_it_does_not_use(tmp_path, given, words):
    # Every run's options have the same groups (LoRA and distillation among them): a run
    # that does not use one refuses its options, before any work.
    from albert_tf.apps import session
    from albert_tf.errors import UsageError
    from albert_tf.tasks.pretraining import PretrainingTask

    options = {"output_dir": str(tmp_path / "out"), "do_train": True,
               "input_text": str(FIXTURES / "pretraining_text.txt"),
               "spm_model_file": str(SPM), **given}
    with pytest.raises(UsageError) as refused:
        session.checked_task(PretrainingTask, options)
    assert words in str(refused.value)
    assert not (tmp_path / "out").exists()


def test_every_run_has_the_same_typed_groups_of_options():
    # The model files, data, training, evaluation, exports, LoRA, distillation and
    # runtime: each option of a run in exactly one group, every task's options (and
    # pretraining's) with all of them, each group given as its own typed dataclass.
    from albert_tf import tasks
    from albert_tf.tasks.options import GROUPS, FineTuningOptions, TrainingOptions

    grouped = [field.name for group in GROUPS for field in dataclasses.fields(group)]
    assert len(grouped) == len(set(grouped)) and set(grouped) == set(RunOptions.names())
    for name, task in tasks.registered().items():
        options = task.Options.build(seed=7)
        for group in GROUPS:
            view = options.group(group)
            assert isinstance(view, group), (name, group)
            assert {f.name: getattr(view, f.name) for f in dataclasses.fields(view)} == \
                {f.name: getattr(options, f.name) for f in dataclasses.fields(view)}
        training = options.group(TrainingOptions)
        assert training.seed == 7
        assert hasattr(training, "train_step") == issubclass(task.Options,
                                                             FineTuningOptions), name
