"""Keeps README.md true: its Python examples and commands run, its figures are printed."""

import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

README = (pathlib.Path(__file__).parent.parent / "README.md").read_text()
FIXTURES = pathlib.Path(__file__).parent / "fixtures"


def blocks(language):
    return re.findall(rf"```{language}\n(.*?)```", README, flags=re.S)


@pytest.fixture
def release_dir(tmp_path, monkeypatch):
    """A stand-in for Google's albert_base/ release: the same files, a tiny model with
    the English 30k vocabulary size."""
    from albert_tf import AlbertConfig, AlbertPretrainer, save_tf1_checkpoint

    config = AlbertConfig(vocab_size=30000, embedding_size=8, hidden_size=16,
                          num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
                          max_position_embeddings=512)
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
    monkeypatch.chdir(tmp_path)
    return release


def test_python_examples_run_in_order(release_dir, capsys):
    namespace = {}
    for code in blocks("python"):
        exec(compile(code, "README.md", "exec"), namespace)
    printed = capsys.readouterr().out
    assert "(1, 16)" in printed and "(1, 6, 16)" in printed
    assert "loaded" in printed and "skipped" in printed
    assert (release_dir.parent / "my_model" / "model.ckpt.index").exists()
    assert float(namespace["total"]) > 0
    assert "['▁this', '▁is', '▁a', '▁test']" in printed and "[48, 25, 21, 1289]" in printed
    assert "(2, 16)" in printed and "(2, 4, " in printed
    assert (release_dir.parent / "cache" / "mrpc_eval.tf_record.meta.json").exists()


def test_shell_commands_print_the_table_figures():
    commands = [line for block in blocks("sh") for line in block.splitlines()
                if line.startswith("python -m albert_tf.param_count")]
    assert commands
    for command in commands:
        args = command.split()[1:]
        result = subprocess.run([sys.executable, *args], capture_output=True, text=True,
                                timeout=120, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
        assert result.returncode == 0, result.stderr
        for size in ("base", "large", "xlarge", "xxlarge"):
            row = next(line for line in README.splitlines() if line.startswith(f"| {size} |"))
            encoder, total = re.findall(r"\d{1,3}(?:,\d{3})+", row)
            printed = next(line for line in result.stdout.splitlines()
                           if line.startswith(f"albert_{size}_v2"))
            assert encoder in printed.split() and total in printed.split()
