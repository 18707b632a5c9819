"""Keeps the documentation true (README.md and the docs/ pages its table links, read in
that order as one text): its Python examples and commands run, its figures are
printed."""

import os
import pathlib
import re
import shlex
import shutil

import pytest

from tests.helpers.forked import run_python
from tests.helpers.paths import ALICE
from tests.helpers.scripts import read_results

ROOT = pathlib.Path(__file__).parent.parent


def documentation_pages() -> list[pathlib.Path]:
    """README.md, then the docs/ pages in the order its table links them."""
    front = (ROOT / "README.md").read_text()
    linked = re.findall(r"\]\((docs/[\w-]+\.md)\)", front)
    return [ROOT / "README.md", *(ROOT / page for page in dict.fromkeys(linked))]


PAGES = documentation_pages()
# Every page in reading order, one text: the examples of a page may use what those of
# the pages before it made, as a reader who follows the table does.
README = "\n".join(page.read_text() for page in PAGES)
FIXTURES = pathlib.Path(__file__).parent / "fixtures"


# The sections whose examples run in a test of their own each (beside the long one).
OWN_TASKS = "Your own tasks"
HUB_WAY = "Using an export the TF Hub way"
ON_THEIR_OWN = (OWN_TASKS, HUB_WAY)
EVERY = "every section"


def blocks(language, section: str | None = EVERY):
    """The README's code blocks of `language`: of every section, of the section
    `section` (one of ON_THEIR_OWN) alone, or (None) of the sections not run on their
    own."""
    found = []
    for text in re.split(r"\n(?=## )", README):
        own = next((name for name in ON_THEIR_OWN if text.startswith(f"## {name}")), None)
        if section == EVERY or own == section:
            found += re.findall(rf"```{language}\n(.*?)```", text, flags=re.S)
    return found


@pytest.fixture
def release_dir(tmp_path, monkeypatch):
    """A stand-in for Google's albert_base/ release: the same files, a tiny model with
    the English 30k vocabulary size."""
    from albert_tf import AlbertPretrainer, save_tf1_checkpoint
    from tests.helpers.tiny import tiny_config

    config = tiny_config(max_position_embeddings=512)
    release = tmp_path / "albert_base"
    release.mkdir()
    config.to_json_file(release / "albert_config.json")
    save_tf1_checkpoint(AlbertPretrainer(config, seed=0), str(release / "model.ckpt-best"))
    shutil.copy(FIXTURES / "spm" / "albert_en_30k_reconstructed.model",
                release / "30k-clean.model")
    # The data the README's examples read, in the layouts the releases use.
    shutil.copytree(FIXTURES / "glue", tmp_path / "glue_data")
    shutil.copytree(FIXTURES / "race" / "RACE", tmp_path / "RACE")
    shutil.copy(FIXTURES / "squad" / "dev-v1.1-excerpt.json", tmp_path / "dev-v1.1.json")
    shutil.copy(FIXTURES / "squad" / "dev-v2.0-excerpt.json", tmp_path / "dev-v2.0.json")
    chinese_release(tmp_path)
    (tmp_path / "corpus").mkdir()
    shutil.copy(ALICE, tmp_path / "corpus")
    monkeypatch.chdir(tmp_path)
    return release


ZH_POSITIVE = ["这部电影非常好看，我很喜欢。", "演员的表演精彩极了。", "故事感人，值得一看。",
               "音乐很美，画面也漂亮。"]
ZH_NEGATIVE = ["这部电影太无聊了。", "剧情混乱，浪费时间。", "表演很差，我不喜欢。",
               "画面模糊，声音难听。"]


def chinese_release(root):
    """A stand-in for Google's albert_base_zh/ (WordPiece vocab_chinese.txt) and a
    Chinese task in SST-2's layout."""
    from albert_tf import AlbertPretrainer, save_tf1_checkpoint
    from tests.helpers.layouts import write_brightmart_checkpoint
    from tests.helpers.tiny import tiny_config

    chars = sorted({c for text in ZH_POSITIVE + ZH_NEGATIVE for c in text})
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *chars, *("##" + c for c in chars)]
    release = root / "albert_base_zh"
    release.mkdir()
    (release / "vocab_chinese.txt").write_text("\n".join(tokens) + "\n", encoding="utf-8")
    config = tiny_config(vocab_size=len(tokens), num_hidden_layers=1)
    config.to_json_file(release / "albert_config.json")
    save_tf1_checkpoint(AlbertPretrainer(config, seed=0), str(release / "model.ckpt-best"))
    # brightmart's albert_tiny_zh/ as released: its own names and embedding math.
    brightmart = root / "albert_tiny_zh"
    brightmart.mkdir()
    (brightmart / "vocab.txt").write_text("\n".join(tokens) + "\n", encoding="utf-8")
    zh_config = tiny_config(vocab_size=len(tokens), extra={"ln_type": "postln"})
    zh_config.to_json_file(brightmart / "albert_config_tiny.json")
    write_brightmart_checkpoint(str(brightmart / "albert_model.ckpt"), zh_config)
    task = root / "zh_data" / "SST-2"
    task.mkdir(parents=True)
    rows = [f"{t}\t1" for t in ZH_POSITIVE] + [f"{t}\t0" for t in ZH_NEGATIVE]
    for split in ("train", "dev"):
        (task / f"{split}.tsv").write_text("sentence\tlabel\n" + "\n".join(rows) + "\n",
                                           encoding="utf-8")


def run_example(code: str, namespace: dict) -> None:
    """Runs a README Python block here, with plain TensorFlow ops for GELU, LayerNorm and
    the optimizer updates, as the commands run (`tests/helpers/forked.py`)."""
    from albert_tf.modeling import fused

    with fused.xla_disabled():
        exec(compile(code, "README.md", "exec"), namespace)


def python_commands(section: str | None = EVERY):
    """The `python ...` lines of the README's shell blocks (continuations joined), of
    the sections `blocks` takes; a command shown twice (the front page's taste, then
    its page) once, where it is first shown."""
    commands = []
    for block in blocks("sh", section):
        for command in block.replace("\\\n", " ").splitlines():
            if command.startswith("python "):
                args = shlex.split(command.split("#")[0])
                if args not in commands:
                    commands.append(args)
    return commands


def run_python_command(args, cwd):
    """Runs a README `python ...` command as a user would, from `cwd` (scripts of the
    repository root are found there)."""
    if args[1].endswith(".py"):
        args = [args[0], str(ROOT / args[1]), *args[2:]]
    return run_python(args[1:], timeout=300, cwd=cwd,
                      env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))


def test_examples_run_in_order(release_dir, capsys):
    from albert_tf.export import read_export_info

    # The shell commands first (the Python examples read what they write).
    for args in python_commands(None):
        if "param_count" in args:
            continue  # checked against the table below
        result = run_python_command(args, release_dir.parent)
        assert result.returncode == 0, (args, result.stderr[-2000:])
    namespace = {}
    for code in blocks("python", None):
        run_example(code, namespace)
    printed = capsys.readouterr().out
    assert "(1, 16)" in printed and "(1, 6, 16)" in printed
    assert "loaded" in printed and "skipped" in printed
    assert (release_dir.parent / "my_model" / "model.ckpt.index").exists()
    assert float(namespace["total"]) > 0
    assert "['▁this', '▁is', '▁a', '▁test']" in printed and "[48, 25, 21, 1289]" in printed
    assert "(2, 16)" in printed and "(2, 4, " in printed
    # Keras' own verbs: the .keras file gives the same logits; both exports written
    assert "keras file 0.0" in printed
    # The Keras way: text models on strings, their .keras file and SavedModel
    for line in ("taste (2, 2)", "logits (2, 4)", "pairs (4, 2)", "choices (1, 3)",
                 "tags (2, 30, 4)", "中文 (2,)", "served (2, 4)"):
        assert line in printed
    assert (release_dir.parent / "pairs_savedmodel" / "saved_model.pb").exists()
    assert "fit on 4 examples; dev predictions (3,)" in printed
    assert (release_dir.parent / "mrpc_keras" / "mrpc_train.tf_record").exists()
    trains = re.search(r"LoRA trains (\d+) of (\d+) weights", printed)
    assert trains and 0 < int(trains.group(1)) < int(trains.group(2)) / 10
    assert (release_dir.parent / "mrpc_lora.npz").exists()
    assert (release_dir.parent / "classifier_keras" / "saved_model.pb").exists()
    assert (release_dir.parent / "classifier.tflite").stat().st_size > 0
    assert (release_dir.parent / "cache" / "mrpc_eval.tf_record.meta.json").exists()
    assert sorted(p.name for p in (release_dir.parent / "pretrain").iterdir()) == [
        "records.tfrecord-00000-of-00002", "records.tfrecord-00001-of-00002"]
    assert printed.count("(8, 128) (8, 20) True") == 2
    out = release_dir.parent
    check_mrpc_run(out, release_dir)
    # the distilled student: the teacher's one shared group in one pass
    assert read_results(out / "mrpc_student" / "eval_results.txt")["global_step"] == 8
    assert (out / "mrpc_student" / "mrpc_train.teacher.tf_record").exists()
    check_recompute_run(out)
    check_squad_v1_run(out / "squad_out", out / "dev-v1.1.json")
    assert (out / "pretrain_out" / "eval_results.txt").exists()
    assert "(1, 2)" in printed
    # "When your data is messy": the summary and the refusal, as the README shows them.
    shown = re.search(r"```text\n(the data read:\n.*?)```", README, re.S).group(1)
    summary, refusal = shown.splitlines()[:2], shown.splitlines()[2]
    assert "\n".join(summary) in printed
    head, tail = refusal.split(" ... ")
    assert re.search(re.escape(head) + ".*" + re.escape(tail), printed)
    answer = namespace["answers"].predictions["0"]
    assert answer and answer in namespace["contexts"][0] and answer in printed
    # Each REST body of the README, sent to the exported model's signature.
    check_rest_bodies(out / "exported" / "mrpc" / "1")
    # The real-use section: RACE, SQuAD v2.0, raw-text pretraining, the Chinese model.
    # (These runs are the tests of run_classifier.py on RACE and of run_squad.py on
    # SQuAD v2.0.)
    assert (out / "race_out" / "model.ckpt-best.index").exists()
    assert 0 <= read_results(out / "race_out" / "eval_results.txt")["eval_accuracy"] <= 1
    check_squad_v2_run(out / "squad2_out", out / "exported" / "squad2" / "1",
                       out / "dev-v2.0.json")
    assert list((out / "text_pretrain_out").glob("ckpt-4.index"))
    assert read_export_info(out / "exported" / "text_pretrain" / "1")["kind"] == "mlm"
    assert (out / "zh_out" / "model.ckpt-best.index").exists()
    assert [p.name for p in (out / "exported" / "zh" / "1" / "assets").iterdir()] == \
        ["vocab_chinese.txt"]
    # Other layouts: brightmart's release read and written as Hugging Face, converted,
    # fine-tuned from the Hugging Face directory and written as one again.
    assert "brightmart True" in printed and "\nhuggingface\n" in printed
    assert (out / "albert_tiny_zh_hf" / "vocab.txt").exists()
    assert sorted(p.name for p in (out / "zh_hf_finetuned").iterdir()) == [
        "config.json", "model.safetensors", "tokenizer_config.json", "vocab.txt"]
    assert (out / "zh_hf_out" / "eval_results.txt").exists()
    # keras-hub: Google's release as a preset (its backbone), a classifier's with its
    # task and tokenizer, each loaded by keras-hub.
    assert "\nkeras_hub\n" in printed and "keras-hub logits (1, 2)" in printed
    assert sorted(p.name for p in (out / "albert_base_keras_hub").iterdir()) == [
        "assets", "config.json", "metadata.json", "model.weights.h5", "tokenizer.json"]
    run_multi_worker_commands(out)


def check_mrpc_run(out, release_dir):
    """The README's MRPC fine-tuning (run_classifier.py: train, eval, predict) and its
    export (export_savedmodel.py): the results, the best and final checkpoints with the
    original's variable names, the test predictions and the GLUE submission, the
    SavedModel of the best checkpoint answering the test pairs' raw text as the run
    predicted them; then a --do_predict run alone, which uses the trained model."""
    import tensorflow as tf

    from tests.helpers.scripts import serve_text

    run = out / "mrpc_out"
    evaluation = read_results(run / "eval_results.txt")
    assert evaluation["global_step"] == 8 and 0 <= evaluation["eval_accuracy"] <= 1
    assert "f1" in evaluation
    assert list((run / "eval").glob("events.out.tfevents.*"))  # TensorBoard eval metrics
    assert read_results(run / "best_trial.txt")["eval_accuracy"] >= \
        evaluation["eval_accuracy"]
    names = dict(tf.train.list_variables(str(run / "model.ckpt-best")))
    assert names["output_weights"] == [2, 16] and "bert/pooler/dense/kernel" in names
    # and so are the final weights, as the original's Estimator kept model.ckpt-<step>
    assert dict(tf.train.list_variables(str(run / "model.ckpt-8"))) == names
    test_rows = (out / "glue_data" / "MRPC" / "test.tsv").read_text().splitlines()[1:]
    probabilities = (run / "test_results.tsv").read_text().splitlines()
    assert len(probabilities) == len(test_rows)
    assert all(abs(sum(map(float, row.split("\t"))) - 1) < 1e-4 for row in probabilities)
    submission = (run / "submission" / "MRPC.tsv").read_text().splitlines()
    assert submission[0] == "index\tprediction" and len(submission) == len(test_rows) + 1
    export = out / "exported" / "mrpc" / "1"
    assert (export / "assets.extra" / "labels.txt").read_text().split() == ["0", "1"]
    pairs = [row.split("\t")[3:5] for row in test_rows]
    served = serve_text(export, text_a=[p[0] for p in pairs],
                        text_b=[p[1] for p in pairs])["probabilities"]
    expected = [[float(x) for x in row.split("\t")] for row in probabilities]
    assert len(served) == len(expected)
    for got, want in zip(served, expected):
        assert got == pytest.approx(want, abs=1e-5)
    result = run_python_command(
        ["python", "run_classifier.py", "--task_name=MRPC", "--data_dir=glue_data",
         f"--spm_model_file={release_dir / '30k-clean.model'}",
         f"--albert_config_file={release_dir / 'albert_config.json'}",
         f"--output_dir={run}", "--do_predict", "--max_seq_length=128"], out)
    assert result.returncode == 0, result.stderr[-2000:]
    assert (run / "test_results.tsv").read_text().splitlines() == probabilities


def check_recompute_run(out):
    """The "Fitting large models" run: the README's MRPC training again, every layer
    recomputed; its final weights are those of the run that kept everything."""
    import numpy as np
    import tensorflow as tf

    kept = tf.train.load_checkpoint(str(out / "mrpc_out" / "model.ckpt-8"))
    recomputed = tf.train.load_checkpoint(str(out / "mrpc_recompute_out" / "model.ckpt-8"))
    shapes = kept.get_variable_to_shape_map()
    assert shapes == recomputed.get_variable_to_shape_map() and len(shapes) > 20
    for name in shapes:
        np.testing.assert_allclose(recomputed.get_tensor(name), kept.get_tensor(name),
                                   rtol=1e-5, atol=1e-6, err_msg=name)


def question_ids(predict_file) -> set:
    import json

    return {qa["id"] for article in json.loads(predict_file.read_text())["data"]
            for paragraph in article["paragraphs"] for qa in paragraph["qas"]}


def check_squad_v1_run(output_dir, predict_file):
    """run_squad.py (v1.1): an answer for every question, n-best lists of 1 to 20, the
    v1.1 scores, and no null odds (tests/test_run_squad.py's v1.1 run before)."""
    import json

    assert set(json.loads((output_dir / "predictions.json").read_text())) == \
        question_ids(predict_file)
    nbest = json.loads((output_dir / "nbest_predictions.json").read_text())
    assert all(1 <= len(entries) <= 20 for entries in nbest.values())
    scores = json.loads((output_dir / "eval_results.json").read_text())
    assert 0 <= scores["exact_match"] <= scores["f1"] <= 100
    assert not (output_dir / "null_odds.json").exists()


def check_squad_v2_run(output_dir, export_dir, predict_file):
    """run_squad.py --version_2_with_negative: an answer and a null odds for every
    question, the v2.0 scores, and the squad_v2 export at the run's max_seq_length."""
    import json

    from albert_tf.export import read_export_info

    info = read_export_info(export_dir)
    assert info["kind"] == "squad_v2" and info["max_seq_length"] == 128
    ids = question_ids(predict_file)
    assert set(json.loads((output_dir / "predictions.json").read_text())) == ids
    assert set(json.loads((output_dir / "null_odds.json").read_text())) == ids
    scores = json.loads((output_dir / "eval_results.json").read_text())
    assert {"exact", "f1", "HasAns_exact", "NoAns_exact", "best_f1",
            "best_f1_thresh"} <= set(scores)


def run_multi_worker_commands(cwd):
    """The README's TF_CONFIG command, once per worker index, the hosts replaced by two
    local ports, both workers at once."""
    import json

    from tests.helpers.scripts import run_cluster

    commands = [c for block in blocks("sh") for c in block.replace("\\\n", " ").splitlines()
                if c.startswith("TF_CONFIG=")]
    assert len(commands) == 1
    assignment, *args = shlex.split(commands[0])
    tf_config = json.loads(assignment.split("=", 1)[1])
    hosts = tf_config["cluster"]["worker"]
    run_cluster(lambda config: run_python(
        [ROOT / args[1], *args[2:]], cwd=cwd, timeout=300,
        env=dict(os.environ, TF_CONFIG=config, TF_CPP_MIN_LOG_LEVEL="3")), len(hosts))
    output_dir = next(a.split("=", 1)[1] for a in args if a.startswith("--output_dir="))
    assert list((cwd / output_dir).glob("ckpt-2.index"))


def check_rest_bodies(version_dir):
    import base64
    import json

    import tensorflow as tf

    from albert_tf.data import records

    model = tf.saved_model.load(str(version_dir))
    example = records.make_example({"input_ids": records.int64_feature([2, 48, 25, 3]),
                                    "input_mask": records.int64_feature([1, 1, 1, 1]),
                                    "segment_ids": records.int64_feature([0, 0, 0, 0])})
    bodies = blocks("json")
    assert len(bodies) == 3
    for body in bodies:
        body = body.replace("SERIALIZED_EXAMPLE_BASE64", base64.b64encode(example).decode())
        request = json.loads(body)
        inputs = {}
        for name, value in request["inputs"].items():
            if value and isinstance(value[0], dict):  # {"b64": ...}: bytes
                inputs[name] = tf.constant([base64.b64decode(v["b64"]) for v in value])
            elif value and isinstance(value[0], str):
                inputs[name] = tf.constant(value)
            else:
                inputs[name] = tf.constant(value, tf.int32)
        outputs = model.signatures[request["signature_name"]](**inputs)
        assert outputs["probabilities"].shape == (1, 2), request["signature_name"]


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as -."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_page_is_in_the_table_and_every_link_lands():
    assert sorted(PAGES[1:]) == sorted((ROOT / "docs").glob("*.md"))
    for page in [*PAGES, ROOT / "BENCHMARKS.md"]:
        for target, fragment in re.findall(r"\]\(([^)#\s]*)(?:#([^)\s]*))?\)",
                                           page.read_text()):
            if "://" in target:
                continue
            path = (page.parent / target) if target else page
            assert path.exists(), f"{page.name}: no {target}"
            if fragment:
                headings = re.findall(r"^#+ (.*)$", path.read_text(), re.M)
                assert fragment in {anchor(h) for h in headings}, \
                    f"{page.name}: no heading #{fragment} in {path.name}"


def test_parameter_count_command_prints_the_table_figures(tmp_path):
    commands = [args for args in python_commands() if "albert_tf.param_count" in args]
    assert commands
    for args in commands:
        result = run_python_command(args, tmp_path)
        assert result.returncode == 0, result.stderr
        for size in ("base", "large", "xlarge", "xxlarge"):
            row = next(line for line in README.splitlines() if line.startswith(f"| {size} |"))
            encoder, total = re.findall(r"\d{1,3}(?:,\d{3})+", row)
            printed = next(line for line in result.stdout.splitlines()
                           if line.startswith(f"albert_{size}_v2"))
            assert encoder in printed.split() and total in printed.split()
