"""Keeps README.md's sections that run on their own true (`test_readme.ON_THEIR_OWN`):
"Your own tasks" and "Using an export the TF Hub way", each in a test of its own, in a
module apart from the long README test so that the two test workers can share them."""

import shutil

import pytest

from tests.test_readme import (  # noqa: F401  (release_dir: the fixture)
    FIXTURES,
    HUB_WAY,
    OWN_TASKS,
    ROOT,
    ZH_NEGATIVE,
    ZH_POSITIVE,
    blocks,
    python_commands,
    release_dir,
    run_example,
    run_python_command,
)


def write_own_task_data(root):
    """The data of the "Your own tasks" section: slices of the real CLUENER (its test
    file without labels, as released), WNUT-17 and C3 files; a prompt-and-endings JSON
    lines file; reviews as CSV and JSON lines; GoEmotions rows; the examples/ folder."""
    import json
    import random

    ner = FIXTURES / "ner"
    (root / "cluener").mkdir()
    shutil.copy(ner / "cluener_train.json", root / "cluener" / "train.json")
    shutil.copy(ner / "cluener_dev.json", root / "cluener" / "dev.json")
    lines = (ner / "cluener_dev.json").read_text(encoding="utf-8").splitlines()
    (root / "cluener" / "test.json").write_text("".join(
        json.dumps({"id": i, "text": json.loads(line)["text"]}, ensure_ascii=False) + "\n"
        for i, line in enumerate(lines[:20])), encoding="utf-8")
    (root / "wnut17").mkdir()
    shutil.copy(ner / "wnut17_train.conll", root / "wnut17" / "wnut17train.conll")
    # The dev slice without its sentences of a tag the training slice lacks (I-product:
    # a dev row labelled outside the training labels is skipped, and three of fifty
    # would stop the run); the full files have every tag in both.
    tags = set((ner / "wnut17_train.conll").read_text(encoding="utf-8").split())
    sentences = (ner / "wnut17_dev.conll").read_text(encoding="utf-8").split("\n\n")
    (root / "wnut17" / "emerging.dev.conll").write_text("\n\n".join(
        s for s in sentences if all(line.split()[-1] in tags
                                    for line in s.splitlines() if line.strip())),
        encoding="utf-8")
    shutil.copytree(FIXTURES / "c3", root / "c3")
    rng = random.Random(0)
    (root / "endings").mkdir()
    prompts = [("She opened her umbrella because", "it started to rain."),
               ("He was hungry, so he", "ate a sandwich."),
               ("The phone rang and she", "answered it.")]
    wrong = ["the moon is made of cheese.", "cats can fly.", "her shoes were red.",
             "the river sang loudly."]
    for split in ("train", "dev"):
        rows = []
        for i, (prompt, right) in enumerate(prompts * 4):
            choices = rng.sample(wrong, 3) + [right]
            rng.shuffle(choices)
            rows.append(json.dumps({"id": f"{split}-{i}", "context": prompt, "question": "",
                                    "choices": choices, "label": choices.index(right)}))
        (root / "endings" / f"{split}.jsonl").write_text("\n".join(rows) + "\n")
    (root / "reviews").mkdir()
    for split in ("train", "dev"):
        rows = ["review,sentiment"] + [f'"{t}, really",{"pos" if i % 2 else "neg"}'
                                       for i, t in enumerate(ZH_POSITIVE + ZH_NEGATIVE)]
        (root / "reviews" / f"{split}.csv").write_text("\n".join(rows) + "\n",
                                                       encoding="utf-8")
        (root / "reviews" / f"{split}.jsonl").write_text("".join(
            json.dumps({"review": t, "label": "pos" if i % 2 else "neg"},
                       ensure_ascii=False) + "\n"
            for i, t in enumerate(ZH_POSITIVE + ZH_NEGATIVE)), encoding="utf-8")
    shutil.copytree(FIXTURES / "goemotions", root / "emotions")
    shutil.copytree(ROOT / "examples", root / "examples")


def test_own_tasks_section_runs(release_dir, capsys):  # noqa: F811
    """The "Your own tasks" section's commands and examples, on the stand-ins: NER on
    CLUENER and WNUT-17 slices with exports whose entities are printed from raw Chinese
    and English text, C3, the prompt-and-endings export, a reviews CSV."""
    import json

    root = release_dir.parent
    write_own_task_data(root)
    commands = python_commands(OWN_TASKS)
    assert len(commands) == 9
    for args in commands:
        result = run_python_command(args, root)
        assert result.returncode == 0, (args, result.stderr[-2000:])
    namespace = {}
    for code in blocks("python", OWN_TASKS):
        run_example(code, namespace)
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == 4
    for line in printed[:2]:  # the entities of each text: a list of tuples
        assert line.startswith("[") and line.endswith("]")
    assert any(printed[2].startswith(e) for e in namespace["endings"])
    # The run from Python (no flag defined in this process is read): its accuracy.
    assert 0.0 <= float(printed[3]) <= 1.0
    assert (root / "reviews_py_out" / "labels.txt").read_text() == "neg\npos\n"
    assert "eval_accuracy" in (root / "reviews_py_out" / "eval_results.txt").read_text()
    predicted = (root / "ner_zh_out" / "test_predictions.json").read_text(encoding="utf-8")
    assert [json.loads(line)["id"] for line in predicted.splitlines()] == list(range(20))
    assert (root / "ner_en_out" / "test_predictions.conll").exists()
    assert "f1" in (root / "ner_en_out" / "eval_results.txt").read_text()
    assert "eval_accuracy" in (root / "c3_out" / "eval_results.txt").read_text()
    assert (root / "reviews_out" / "labels.txt").read_text() == "neg\npos\n"
    assert (root / "endings_out" / "model.ckpt-best.index").exists()
    assert "micro_f1" in (root / "emotions_out" / "eval_results.txt").read_text()
    assert (root / "emotions_out" / "threshold.txt").exists()
    assert (root / "mean_pool_out" / "labels.txt").read_text() == "neg\npos\n"
    assert "eval_accuracy" in (root / "mean_pool_out" / "eval_results.txt").read_text()
    assert (root / "mean_pool_google" / "model.ckpt.index").exists()
    # Its head has no transformers counterpart: --to=huggingface says so.
    from albert_tf import CheckpointError, convert, tasks

    tasks.load_task_module(root / "examples" / "mean_pool_classifier.py")  # its model
    with pytest.raises(CheckpointError, match="has no Hugging Face counterpart"):
        convert.convert(root / "mean_pool_google", root / "mean_pool_hf")
    # export_savedmodel.py --task_module: the run's kind, labels and text packing.
    extra = root / "serving" / "mean_pool" / "1" / "assets.extra"
    assert (extra / "labels.txt").read_text() == "neg\npos\n"
    info = json.loads((extra / "export_info.json").read_text())
    assert info["kind"] == "mean_pool_classifier" and info["is_pair"] is False
    assert (root / "mean_pool.tflite").exists()


def test_hub_way_section_runs(release_dir, capsys):  # noqa: F811
    """The TF Hub section: the encoder export with its preprocessor beside it, built
    into a tf-keras text-pair classifier through hub.KerasLayer, fine-tuned and saved;
    the saved model answers raw text (tests/test_reusable_export.py checks the
    gradients, the weights and the numbers)."""
    import tensorflow as tf

    root = release_dir.parent
    commands = python_commands(HUB_WAY)
    assert len(commands) == 1
    result = run_python_command(commands[0], root)
    assert result.returncode == 0, result.stderr[-2000:]
    namespace = {}
    for code in blocks("python", HUB_WAY):
        run_example(code, namespace)
    assert len(namespace["history"].history["loss"]) == 2
    serve = tf.saved_model.load(str(root / "hub" / "pair_classifier")).signatures[
        "serving_default"]
    inputs = sorted(serve.structured_input_signature[1])  # the two texts, in order
    (logits,) = serve(**dict(zip(inputs, namespace["pairs"]))).values()
    assert logits.shape == (2, 2)
