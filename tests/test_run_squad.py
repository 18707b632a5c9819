"""run_squad.py end to end on tiny models: v1.1 and v2.0, files and official scores."""

import json
import os

import pytest

from tests.helpers.forked import run_python
from tests.helpers.scripts import FIXTURES, ROOT, SPM, run_script
from tests.helpers.tiny import write_tiny_config

V1 = FIXTURES / "squad" / "dev-v1.1-excerpt.json"
V2 = FIXTURES / "squad" / "dev-v2.0-excerpt.json"


def run(*args, check=True):
    return run_script("run_squad.py", *args, check=check)


@pytest.fixture(scope="module")
def config(tmp_path_factory):
    return write_tiny_config(tmp_path_factory.mktemp("config"), max_position_embeddings=128)


def flags(config, output_dir, data):
    return [f"--train_file={data}", f"--predict_file={data}", f"--spm_model_file={SPM}",
            f"--albert_config_file={config}", f"--output_dir={output_dir}",
            "--max_seq_length=128", "--doc_stride=64", "--max_query_length=32",
            "--train_batch_size=4", "--predict_batch_size=4", "--num_train_epochs=1",
            "--iterations_per_loop=5", "--learning_rate=1e-3"]


def latest_step(output_dir) -> int:
    """The step of the run's last (object-based) checkpoint, ckpt-N."""
    import tensorflow as tf

    return int(tf.train.latest_checkpoint(str(output_dir)).rsplit("-", 1)[1])


# SQuAD v1.1 (training, predictions, n-best, scores): the README's SQuAD command, checked
# by tests/test_readme.py; a run that reads the features an earlier one cached:
# tests/test_resume.py (its restarted run_squad).
# --version_2_with_negative (training, predictions, null odds, v2.0 scores, export): the
# README's SQuAD v2.0 command, checked by tests/test_readme.py.


@pytest.mark.parametrize("args, message", [
    (["--do_predict"], "needs a trained model"),
    (["--do_train", "--train_file=/no/train.json"], "--train_file=/no/train.json"),
    (["--do_train", "--max_seq_length=256"], "max_position_embeddings (128)"),
    (["--do_train", "--doc_stride=0"], "doc_stride"),
])
def test_bad_input_fails_before_training(tmp_path, config, args, message):
    result = run(*flags(config, tmp_path / "bad", V1), *args, check=False)
    assert result.returncode != 0 and message in result.stderr, result.stderr[-2000:]
    assert not list((tmp_path / "bad").glob("ckpt-*"))


# The export's serve_text plus postprocess_serve_text against run_squad.py: on every
# question whose context fits in one window, the same n-best lists and answers.
SERVE_TEXT = r"""
import json, sys
import tensorflow_text  # registers the tokenizer ops before the load
import tensorflow as tf
from albert_tf.evaluation.squad_postprocess import postprocess_serve_text

export_dir, items_file, out_file = sys.argv[1:]
ids, questions, contexts = zip(*json.loads(open(items_file).read()))
serve_text = tf.saved_model.load(export_dir).signatures["serve_text"]
outputs = serve_text(question=tf.constant(questions), context=tf.constant(contexts))
result = postprocess_serve_text(questions, contexts,
                                {k: v.numpy() for k, v in outputs.items()}, qas_ids=ids)
with open(out_file, "w") as f:
    json.dump({"nbest": result.nbest, "null_odds": result.null_odds,
               "predictions": result.predictions}, f)
"""


def one_window_questions(path, max_seq_length, max_query_length):
    from albert_tf.tokenization import FullTokenizer

    tokenizer = FullTokenizer(None, True, SPM)
    items, skipped = [], []
    for article in json.loads(path.read_text())["data"]:
        for paragraph in article["paragraphs"]:
            context = paragraph["context"]
            for qa in paragraph["qas"]:
                q = min(len(tokenizer.tokenize(qa["question"])), max_query_length)
                fits = q + len(tokenizer.tokenize(context)) + 3 <= max_seq_length
                (items if fits else skipped).append((qa["id"], qa["question"], context))
    return items, skipped


@pytest.mark.parametrize("version", ["v1.1", "v2.0"])
def test_export_serve_text_reproduces_run_squad(tmp_path, version):
    config = write_tiny_config(tmp_path, max_position_embeddings=384)
    data, out = (V1 if version == "v1.1" else V2), tmp_path / "run"
    args = [*flags(config, out, data), "--max_seq_length=384", "--doc_stride=128",
            "--max_query_length=64"]
    if version == "v2.0":  # the script's own export
        args += ["--version_2_with_negative", f"--export_dir={out / 'export'}"]
    run("--do_train", "--do_predict", *args)
    if version == "v1.1":  # export_savedmodel.py from the run's TF1 checkpoint
        (checkpoint,) = out.glob("model.ckpt-*.index")
        assert checkpoint.name == f"model.ckpt-{latest_step(out)}.index"
        run_script("export_savedmodel.py", "--kind=squad_v1",
                   f"--checkpoint={str(checkpoint)[:-len('.index')]}",
                   f"--albert_config_file={config}", f"--spm_model_file={SPM}",
                   "--max_seq_length=384", "--max_query_length=64",
                   f"--export_dir={out / 'export'}")
        # run_classifier.py --task_name=squad runs the same task: the same predictions
        # of the trained model (and the same official scores).
        by_run_squad = {name: (out / name).read_text()
                        for name in ("predictions.json", "eval_results.json")}
        run_script("run_classifier.py", "--task_name=squad", "--do_predict",
                   f"--predict_file={data}", f"--spm_model_file={SPM}",
                   f"--albert_config_file={config}", f"--output_dir={out}",
                   "--max_seq_length=384", "--doc_stride=128", "--max_query_length=64",
                   "--predict_batch_size=4")
        assert {name: (out / name).read_text() for name in by_run_squad} == by_run_squad
    items, skipped = one_window_questions(data, 384, 64)
    assert len(items) >= 20 and len(skipped) <= 4  # only the 1042-piece v1.1 paragraph
    (tmp_path / "items.json").write_text(json.dumps(items))
    run_python(["-c", SERVE_TEXT, out / "export" / "1", tmp_path / "items.json",
                tmp_path / "served.json"],
               check=True, cwd=ROOT, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    served = json.loads((tmp_path / "served.json").read_text())
    expected_nbest = json.loads((out / "nbest_predictions.json").read_text())
    for qas_id, _, _ in items:
        want, got = expected_nbest[qas_id], served["nbest"][qas_id]
        assert [e["text"] for e in got] == [e["text"] for e in want], qas_id
        for a, b in zip(got, want):
            assert a["probability"] == pytest.approx(b["probability"], abs=1e-4)
            assert a["start_log_prob"] == pytest.approx(b["start_log_prob"], abs=1e-4)
    if version == "v1.1":
        expected = json.loads((out / "predictions.json").read_text())
        assert {i: served["predictions"][i] for i, _, _ in items} == \
            {i: expected[i] for i, _, _ in items}
    else:
        null_odds = json.loads((out / "null_odds.json").read_text())
        for qas_id, _, _ in items:
            assert served["null_odds"][qas_id] == pytest.approx(null_odds[qas_id], abs=1e-4)
