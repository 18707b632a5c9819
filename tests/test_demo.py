"""The demo (`make demo`, `python demo.py`) end to end, in its --quick setting."""

import json
import os
import re

import pytest

from demo_app import data as demo_data
from demo_app import steps as demo
from tests.helpers.forked import RELAY_VARIABLE, run_python
from tests.helpers.scripts import ROOT

NUMBER = r"([0-9]+\.[0-9]+)"


def run_demo(work_dir, *args):
    # The demo's scripts and client (`python` children) forked as the demo is.
    result = run_python([ROOT / "demo.py", f"--work_dir={work_dir}", "--quick", *args],
                        timeout=600, cwd=ROOT, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2",
                                                        **{RELAY_VARIABLE: "1"}))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    work_dir = tmp_path_factory.mktemp("demo") / "demo_output"
    return work_dir, run_demo(work_dir)


def summary_numbers(output):
    heldout = re.search(rf"held-out masked-LM accuracy {NUMBER}\s+sentence-order accuracy "
                        rf"{NUMBER}", output)
    dev = re.search(rf"review dev accuracy {NUMBER}", output)
    assert heldout and dev, output[-3000:]
    return [float(x) for x in (*heldout.groups(), *dev.groups())]


def served_lines(output):
    """(label, probability, text) of each sample request in the summary."""
    return [(m.group(1), float(m.group(2)), m.group(3)) for m in re.finditer(
        r"^    (positive|negative) +([01]\.[0-9]{2})  \"(.*)\"  \[", output, flags=re.M)]


def test_quick_demo_runs_every_step_and_reports(quick_run):
    work_dir, output = quick_run
    for step in range(1, 8):
        assert f"[{step}/7]" in output
    # The real scripts ran, and their progress lines were shown.
    assert "$ python run_pretraining.py" in output and "$ python run_classifier.py" in output
    assert re.search(r"\| step 20/20 +loss [0-9.]+ +masked_lm_loss", output)
    for value in summary_numbers(output):
        assert 0 <= value <= 1
    served = served_lines(output)
    assert [text for _, _, text in served] == [text for text, _ in demo.SAMPLE_REVIEWS]
    assert all(0.5 <= p <= 1 for _, p, _ in served)
    assert "Demo finished in" in output
    # The files the summary lists.
    for relative in ("spm/demo.model", "albert_config.json", "pretraining/ckpt-20.index",
                     "pretraining/model.ckpt-20.index", "pretraining/eval_results.txt",
                     "classifier/model.ckpt-best.index", "classifier/best_trial.txt",
                     "savedmodel/1/saved_model.pb", "savedmodel/1/assets.extra/labels.txt",
                     "ask.py", "data/glue/SST-2/dev.tsv", "logs/pretraining.log"):
        assert (work_dir / relative).exists(), relative
    files = output[output.index("\nFiles\n"):]
    for relative in ("spm/demo.model", "pretraining/model.ckpt-20",
                     "classifier/model.ckpt-best", "savedmodel/1"):
        assert str(work_dir / relative) in files, relative


def test_sentencepiece_model_follows_albert_conventions(quick_run):
    import sentencepiece as spm

    work_dir, _ = quick_run
    processor = spm.SentencePieceProcessor(model_file=str(work_dir / "spm" / "demo.model"))
    assert [processor.IdToPiece(i) for i in range(5)] == [
        "<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"]
    assert processor.pad_id() == 0 and processor.unk_id() == 1
    assert all(processor.IsControl(i) for i in (2, 3, 4))
    config = json.loads((work_dir / "albert_config.json").read_text())
    assert config["vocab_size"] == processor.GetPieceSize()


def test_the_saved_model_answers_raw_text_in_a_fresh_process(quick_run):
    work_dir, output = quick_run
    texts = [text for text, _ in demo.SAMPLE_REVIEWS]
    result = run_python([work_dir / "ask.py", "--json", *texts], timeout=300,
                        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert result.returncode == 0, result.stderr[-3000:]
    answer = json.loads(result.stdout.strip().splitlines()[-1])
    assert answer["model"] == str(work_dir / "savedmodel" / "1")
    # The same answers as those the demo printed.
    printed = served_lines(output)
    assert [demo.LABELS[label] for label in answer["predictions"]] == [
        label for label, _, _ in printed]
    assert answer["probabilities"] == pytest.approx([p for _, p, _ in printed], abs=0.006)


def test_a_rerun_resumes_and_keeps_finished_steps(quick_run):
    work_dir, first = quick_run
    before = {path: path.stat().st_mtime_ns
              for path in (work_dir / "spm" / "demo.model",
                           work_dir / "classifier" / "model.ckpt-best.index",
                           work_dir / "data" / "stories" / "train.txt")}
    output = run_demo(work_dir)
    assert f"resuming the run in {work_dir}" in output
    assert output.count("done in an earlier run: kept") == 6  # all but serving
    assert "$ python run_pretraining.py" not in output
    assert summary_numbers(output) == summary_numbers(first)
    assert served_lines(output) == served_lines(first)
    assert {path: path.stat().st_mtime_ns for path in before} == before
    assert sorted(os.listdir(work_dir / "savedmodel")) == ["1"]


# ------------------------------------------------------------- without training
def record(**changes):
    return demo.settings_record(demo.QUICK, changes.pop("seed", 1), quick=True) | changes


def test_work_dir_starts_clean_on_fresh_or_other_settings(tmp_path, capsys):
    workspace = demo.Workspace(str(tmp_path / "run"))
    state = demo.prepare_work_dir(workspace, record(), fresh=False)
    assert "starting a new run" in capsys.readouterr().out
    state.mark_done("data", {"documents": 3})
    (tmp_path / "run" / "marker").write_text("x")

    resumed = demo.prepare_work_dir(workspace, record(), fresh=False)
    assert resumed.done == {"data": {"documents": 3}}
    assert "resuming the run" in capsys.readouterr().out

    other = demo.prepare_work_dir(workspace, record(seed=2), fresh=False)
    assert other.done == {} and not (tmp_path / "run" / "marker").exists()
    assert "other settings" in capsys.readouterr().out

    other.mark_done("data")
    (tmp_path / "run" / "marker").write_text("x")
    fresh = demo.prepare_work_dir(workspace, record(seed=2), fresh=True)
    assert fresh.done == {} and not (tmp_path / "run" / "marker").exists()
    assert "--fresh: deleting" in capsys.readouterr().out


def test_a_directory_that_is_not_a_demo_run_is_never_deleted(tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "precious.txt").write_text("keep me")
    with pytest.raises(demo.DemoError, match="not a demo work directory"):
        demo.prepare_work_dir(demo.Workspace(str(tmp_path / "mine")), record(), fresh=True)
    assert (tmp_path / "mine" / "precious.txt").read_text() == "keep me"


def test_generated_data_is_a_function_of_the_seed(tmp_path):
    first = demo_data.write_corpus(tmp_path / "a.txt", 50, seed=3)
    demo_data.write_corpus(tmp_path / "b.txt", 50, seed=3)
    demo_data.write_corpus(tmp_path / "c.txt", 50, seed=4)
    assert (tmp_path / "a.txt").read_bytes() == (tmp_path / "b.txt").read_bytes()
    assert (tmp_path / "a.txt").read_bytes() != (tmp_path / "c.txt").read_bytes()
    documents = (tmp_path / "a.txt").read_text().strip().split("\n\n")
    assert len(documents) == first["documents"] == 50
    assert sum(len(d.splitlines()) for d in documents) == first["sentences"]
    assert demo_data.review_examples(20, seed=5) == demo_data.review_examples(20, seed=5)


def test_reviews_are_a_glue_sst2_task(tmp_path):
    from albert_tf.data import glue

    counts = demo_data.write_sst2(tmp_path, train=300, dev=50, test=10, seed=0)
    assert counts == {"train": 300, "dev": 50, "test": 10}
    processor = glue.get_processor("sst-2")
    train = processor.get_train_examples(str(tmp_path))
    assert len(train) == 300 and {e.label for e in train} == {"0", "1"}
    assert 0.35 < sum(e.label == "1" for e in train) / 300 < 0.65
    assert len(processor.get_test_examples(str(tmp_path))) == 10
    # Negation flips the label: the adjective alone does not decide it.
    negated = [e for e in train if " not " in e.text_a]
    assert negated and any(
        e.label == "1" and any(f"not {w}" in e.text_a for w in demo_data.NEGATIVE)
        for e in negated)


def test_progress_filter_shows_the_scripts_progress_only():
    progress = ("I1122 05:19:22.390399 140043070806912 loop.py:218] step 50/300  loss 6.2407"
                "  lr 0.0083  5.12 steps/s  ETA 0m48s")
    assert demo._shown(progress, verbose=False).startswith("step 50/300  loss 6.2407")
    noise = "I1122 05:19:53.696763 1400 functional_saver.py:440] Sharding callback duration"
    assert demo._shown(noise, verbose=False) is None
    cxx = "E0000 00:00:1795324749.145739    1876 cuda_platform.cc:52] failed call to cuInit"
    assert demo._shown(cxx, verbose=False) is None
    assert demo._shown("error: --data_dir=x is not a directory", verbose=False)
    assert demo._shown(noise, verbose=True) == noise
