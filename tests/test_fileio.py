"""albert_tf.fileio: writers that leave a whole file or none, and the local/URL readers."""

import os

import pytest

from albert_tf import fileio


class Interrupted(Exception):
    """Stands for whatever stops a writer half-way."""


def names_in(directory):
    return sorted(os.listdir(directory))


# ------------------------------------------------------------------- atomic_path
def test_atomic_path_renames_a_complete_file_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "new" / "out.txt"  # the directory is created
    with fileio.atomic_path(target) as tmp:
        assert os.path.dirname(tmp) == str(target.parent) and tmp != str(target)
        with open(tmp, "w") as f:
            f.write("whole")
        assert not target.exists()  # nothing there before the block ends
    assert target.read_text() == "whole"
    assert names_in(target.parent) == ["out.txt"]


def test_atomic_path_failure_leaves_neither_temporary_nor_target(tmp_path):
    target = tmp_path / "out.txt"
    with pytest.raises(Interrupted):
        with fileio.atomic_path(target) as tmp:
            with open(tmp, "w") as f:
                f.write("half")
            raise Interrupted
    assert names_in(tmp_path) == []


def test_atomic_path_failure_keeps_the_previous_file(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("before")
    with pytest.raises(Interrupted):
        with fileio.atomic_path(target) as tmp:
            with open(tmp, "w") as f:
                f.write("half")
            raise Interrupted
    assert target.read_text() == "before"
    assert names_in(tmp_path) == ["out.txt"]


def test_atomic_path_replaces_an_existing_file(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("before")
    fileio.write_text_atomically(target, "after")
    assert target.read_text() == "after"
    assert names_in(tmp_path) == ["out.txt"]


def test_atomic_path_renames_every_suffix(tmp_path):
    # A TF checkpoint is two files under one prefix.
    suffixes = (".index", ".data-00000-of-00001")
    prefix = tmp_path / "model.ckpt"
    with fileio.atomic_path(prefix, suffixes) as tmp:
        for i, suffix in enumerate(suffixes):
            with open(tmp + suffix, "w") as f:
                f.write(str(i))
    assert names_in(tmp_path) == ["model.ckpt.data-00000-of-00001", "model.ckpt.index"]
    assert [(tmp_path / f"model.ckpt{s}").read_text() for s in suffixes] == ["0", "1"]


def test_atomic_path_failure_removes_every_suffix(tmp_path):
    suffixes = (".index", ".data-00000-of-00001")
    with pytest.raises(Interrupted):
        with fileio.atomic_path(tmp_path / "model.ckpt", suffixes) as tmp:
            for suffix in suffixes:
                with open(tmp + suffix, "w") as f:
                    f.write("half")
            raise Interrupted
    assert names_in(tmp_path) == []


# -------------------------------------------------------------- atomic_directory
def test_atomic_directory_renames_a_complete_directory(tmp_path):
    target = tmp_path / "export" / "1"
    (tmp_path / "export").mkdir()
    with fileio.atomic_directory(target) as tmp:
        assert os.path.basename(tmp).startswith(".")  # skipped by version scans
        assert names_in(tmp) == []
        (tmp_path / "export" / os.path.basename(tmp) / "saved_model.pb").write_bytes(b"pb")
        assert not target.exists()
    assert names_in(target) == ["saved_model.pb"]
    assert names_in(tmp_path / "export") == ["1"]


def test_atomic_directory_failure_removes_the_directory_and_its_files(tmp_path):
    with pytest.raises(Interrupted):
        with fileio.atomic_directory(tmp_path / "1") as tmp:
            os.makedirs(os.path.join(tmp, "variables"))
            with open(os.path.join(tmp, "variables", "variables.index"), "wb") as f:
                f.write(b"half")
            raise Interrupted
    assert names_in(tmp_path) == []


def test_atomic_directory_refuses_to_replace_an_existing_directory(tmp_path):
    target = tmp_path / "1"
    target.mkdir()
    (target / "saved_model.pb").write_bytes(b"first")
    with pytest.raises(FileExistsError, match="not replaced"):
        with fileio.atomic_directory(target) as tmp:
            with open(os.path.join(tmp, "saved_model.pb"), "wb") as f:
                f.write(b"second")
    assert (target / "saved_model.pb").read_bytes() == b"first"
    assert names_in(tmp_path) == ["1"]  # the temporary directory is gone


# ------------------------------------------------------- integer_subdirectories
def test_integer_subdirectories_are_the_versions_sorted_as_numbers(tmp_path):
    for name in ("10", "2", "1", "latest", ".tmp-3-abc", "1.5", "-4"):
        (tmp_path / name).mkdir()
    (tmp_path / "7").write_text("a file, not a version")
    assert fileio.integer_subdirectories(tmp_path) == [1, 2, 10]


def test_integer_subdirectories_of_a_missing_directory_is_empty(tmp_path):
    assert fileio.integer_subdirectories(tmp_path / "missing") == []
    assert fileio.integer_subdirectories(str(tmp_path)) == []


# --------------------------------------------------------------- small helpers
def test_write_text_atomically_round_trips_utf8(tmp_path):
    text = "naïve café ☃\n中文\n"
    fileio.write_text_atomically(tmp_path / "a" / "b.txt", text)
    assert (tmp_path / "a" / "b.txt").read_text(encoding="utf-8") == text
    assert fileio.read_bytes(tmp_path / "a" / "b.txt") == text.encode("utf-8")


def test_write_bytes_atomically_and_open_binary(tmp_path):
    data = bytes(range(256))
    fileio.write_bytes_atomically(tmp_path / "blob", data)
    with fileio.open_binary(tmp_path / "blob") as f:
        assert f.read(4) == b"\x00\x01\x02\x03"
        assert f.read() == data[4:]
    assert fileio.read_bytes(str(tmp_path / "blob")) == data
    assert names_in(tmp_path) == ["blob"]


def test_exists_and_remove_if_exists(tmp_path):
    path = tmp_path / "f"
    assert not fileio.exists(path)
    fileio.remove_if_exists(path)  # nothing to remove: no error
    path.write_text("x")
    assert fileio.exists(path)
    fileio.remove_if_exists(path)
    assert not fileio.exists(path) and names_in(tmp_path) == []


def test_urls_and_local_paths(tmp_path, monkeypatch):
    assert fileio.is_url("gs://bucket/model.ckpt") and fileio.is_url("hdfs://host/x")
    assert not fileio.is_url("/tmp/x") and not fileio.is_url(tmp_path / "x")
    assert fileio.abspath_or_url("gs://bucket/x") == "gs://bucket/x"
    assert fileio.abspath_or_url(None) is None and fileio.abspath_or_url("") is None
    monkeypatch.chdir(tmp_path)
    assert fileio.abspath_or_url("sub/x") == os.path.join(os.getcwd(), "sub", "x")
