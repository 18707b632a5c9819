"""run_pretraining.py end to end on a tiny model: records and dynamic masking."""

import pytest

from tests.helpers.paths import ALICE
from tests.helpers.scripts import FIXTURES, SPM, read_results
from tests.helpers.scripts import run_script as run
from tests.helpers.tiny import write_tiny_config

CORPUS = str(ALICE)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    directory = tmp_path_factory.mktemp("pretraining")
    write_tiny_config(directory, max_position_embeddings=128).rename(directory / "tiny.json")
    run("create_pretraining_data.py", f"--input_file={CORPUS}",
        f"--output_file={directory / 'records.tfrecord'}", f"--spm_model_file={SPM}",
        "--max_seq_length=64", "--max_predictions_per_seq=10", "--dupe_factor=2")
    return directory


COMMON = ["--train_batch_size=8", "--eval_batch_size=8", "--max_seq_length=64",
          "--max_predictions_per_seq=10", "--learning_rate=0.01", "--num_warmup_steps=2",
          "--iterations_per_loop=3", "--max_eval_steps=3"]


def eval_results(directory):
    return read_results(directory / "eval_results.txt")


def test_trains_evaluates_and_resumes_from_records(workspace):
    out = workspace / "out"
    args = [f"--input_file={workspace / 'records.tfrecord'}",
            f"--albert_config_file={workspace / 'tiny.json'}", f"--output_dir={out}",
            "--do_train", "--do_eval", "--save_checkpoints_steps=3", *COMMON]
    run("run_pretraining.py", *args, "--num_train_steps=6")
    assert sorted(p.name for p in out.glob("ckpt-*.index")) == ["ckpt-3.index", "ckpt-6.index"]
    results = eval_results(out)
    assert results["global_step"] == 6
    assert set(results) >= {"masked_lm_accuracy", "masked_lm_loss",
                            "sentence_order_accuracy", "sentence_order_loss"}
    assert 0 <= results["masked_lm_accuracy"] <= 1 and results["masked_lm_loss"] > 0
    # Asking for more steps resumes from step 6, not from scratch.
    result = run("run_pretraining.py", *args, "--num_train_steps=9")
    assert "resumed from" in result.stderr and "ckpt-6" in result.stderr
    assert eval_results(out)["global_step"] == 9
    # The original's model.ckpt-N, which the fine-tuning scripts start from: the run's
    # directory names it, and its albert_config.json (kept by the run) the config.
    assert (out / "model.ckpt-9.index").exists()
    from albert_tf import AlbertConfig

    assert AlbertConfig.from_json_file(out / "albert_config.json") == \
        AlbertConfig.from_json_file(workspace / "tiny.json")
    classify = run("run_classifier.py", "--task_name=MRPC", f"--data_dir={FIXTURES / 'glue'}",
                   f"--spm_model_file={SPM}", f"--init_checkpoint={out}",
                   f"--output_dir={out / 'mrpc'}",
                   "--do_train", "--max_seq_length=64", "--train_batch_size=8",
                   "--train_step=1", "--warmup_step=0")
    assert "loaded" in classify.stderr and (out / "mrpc" / "ckpt-1.index").exists()


# Training, evaluation and export from raw text (dynamic masking): the uninterrupted run
# of tests/test_resume.py.


@pytest.mark.parametrize("args, message", [
    (["--input_file=/no/such/*.tfrecord", "--do_train"], "/no/such/*.tfrecord"),
    (["--do_train"], "exactly one of --input_file"),
    ([f"--input_file={CORPUS}"], "nothing to do"),
    ([f"--input_file={CORPUS}", "--do_train", "--train_batch_size=7",
      "--distribution_strategy=mirrored"], None),
])
def test_bad_flags_fail_before_training(workspace, args, message):
    result = run("run_pretraining.py", f"--albert_config_file={workspace / 'tiny.json'}",
                 f"--output_dir={workspace / 'bad'}", *args, check=False)
    assert result.returncode != 0
    if message:
        assert message in result.stderr
    assert not list((workspace / "bad").glob("ckpt-*"))
