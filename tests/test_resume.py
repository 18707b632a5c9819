"""Preempted runs end where uninterrupted ones do: each script, with dropout 0.1 in the
encoder and the head and two accumulation steps, SIGKILLed between checkpoints (at step
6, with the work since step 4 lost) and restarted: run_squad on one device and
run_pretraining mirrored over two logical CPUs, on raw text, which it reads on one
device as on two; run_classifier mirrored with --recompute, a wider student distilled
from a teacher's cached outputs, its hidden states (through a projection the run
trains) and its attention (the teacher in each step), killed right after the
checkpoint of step 8 instead (the one loop of every script resumes from a fresh
checkpoint as from an older one, so each case is killed once). Its last checkpoint
equals the uninterrupted run's bit for bit (weights, optimizer slots, step).

Exact, not close: every draw (dropout masks, shuffles, dynamic masks and sentence-order
swaps) is a function of (seed, step, micro-batch, replica) or of the data position, and a
restarted process computes the same ops on the same devices in the same order. (Each
run starts and traces its step anew, seconds each.)
"""

import pytest

from tests.helpers import faults
from tests.helpers.paths import ALICE
from tests.helpers.scripts import FIXTURES, SPM, run_with_faults
from tests.helpers.tiny import write_tiny_config

STEPS, SAVE_EVERY = 12, 4
# Where each (script, strategy) is killed; the others at step 6.
KILLS = {("run_classifier", "mirrored"): (8,)}


@pytest.fixture(scope="module")
def config(tmp_path_factory):
    return write_tiny_config(tmp_path_factory.mktemp("config"), max_position_embeddings=64,
                             hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)


def flags(script, config, output_dir):
    common = [f"--spm_model_file={SPM}", f"--albert_config_file={config}",
              f"--output_dir={output_dir}", "--do_train", "--train_batch_size=8",
              "--gradient_accumulation_steps=2", f"--save_checkpoints_steps={SAVE_EVERY}",
              "--iterations_per_loop=2", "--learning_rate=1e-3", "--seed=5"]
    if script == "run_classifier":  # the head's dropout: --dropout_prob's default, 0.1
        return [*common, "--task_name=MRPC", f"--data_dir={FIXTURES / 'glue'}",
                "--max_seq_length=32", f"--train_step={STEPS}", "--warmup_step=2"]
    if script == "run_squad":
        data = FIXTURES / "squad" / "dev-v1.1-excerpt.json"
        return [*common, f"--train_file={data}", "--max_seq_length=64", "--doc_stride=32",
                "--max_query_length=16", "--num_train_epochs=4"]  # 25 questions: 12 steps
    return [*common, f"--input_text={ALICE}", "--max_seq_length=32",
            "--max_predictions_per_seq=5", f"--num_train_steps={STEPS}",
            "--num_warmup_steps=2"]


def last_checkpoint(directory):
    import tensorflow as tf

    return tf.train.latest_checkpoint(str(directory))


# (script, strategy, more flags): the mirrored classifier recomputes its layers, whose
# dropout masks must replay in the backward pass and again after the restart.
CASES = [("run_squad", "one_device", ()), ("run_classifier", "mirrored", ("--recompute",)),
         ("run_pretraining", "mirrored", ())]


@pytest.fixture(scope="module")
def mrpc_teacher(tmp_path_factory, config):
    """A teacher for the classifier's case: the same config trained 2 steps on MRPC (its
    output directory keeps its config)."""
    out = tmp_path_factory.mktemp("teacher") / "out"
    run_with_faults("run_classifier", *flags("run_classifier", config, out)[:-2],
                    "--train_step=2", "--warmup_step=0")
    return out


@pytest.mark.parametrize(("script", "strategy", "more"), CASES,
                         ids=["-".join((s, d, *m)).replace("--", "") for s, d, m in CASES])
def test_a_killed_run_ends_with_the_uninterrupted_weights_and_slots(
        tmp_path, config, script, strategy, more, request):
    devices = {"logical_cpus": 2} if strategy == "mirrored" else {}
    run_flags = (f"--distribution_strategy={strategy}", *more)
    if script == "run_classifier":  # a wider student: its batches carry the teacher's
        # outputs, and its steps run the teacher for its hidden states (which the
        # student's learn through a projection, checkpointed with the run) and attention
        wide = write_tiny_config(tmp_path / "wide", max_position_embeddings=64,
                                 hidden_size=24, intermediate_size=48,
                                 hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
        run_flags += (f"--teacher_checkpoint={request.getfixturevalue('mrpc_teacher')}",
                      f"--albert_config_file={wide}", "--distill_hidden_weight=1",
                      "--distill_attention_weight=1")
    straight = tmp_path / "straight"
    run_with_faults(script, *flags(script, config, straight), *run_flags, **devices)
    killed = tmp_path / "killed"
    for step in KILLS.get((script, strategy), (6,)):
        run_with_faults(script, *flags(script, config, killed), *run_flags,
                        kill_at=step, **devices)
        assert last_checkpoint(killed).endswith(f"ckpt-{step // SAVE_EVERY * SAVE_EVERY}")
    restarted = run_with_faults(script, *flags(script, config, killed), *run_flags,
                                **devices)
    if script == "run_squad":  # the restart reads the features its first run cached
        assert "using the" in restarted.stderr and "cached SQuAD features" in \
            restarted.stderr
    if script == "run_classifier":  # ... and the teacher's outputs
        assert "using cached records" in restarted.stderr and \
            "teacher.tf_record" in restarted.stderr
    straight = last_checkpoint(straight)
    assert straight.endswith(f"ckpt-{STEPS}") and last_checkpoint(killed).endswith(f"ckpt-{STEPS}")
    compared = faults.assert_same_checkpoints(straight, last_checkpoint(killed))
    assert compared > 30  # weights, both Adam slots, the step
    if script == "run_classifier":  # the projection among them (its slots: the optimizer's)
        assert len([n for n in faults.checkpoint_values(straight)
                    if n.startswith("distill_projection/")]) == 2
