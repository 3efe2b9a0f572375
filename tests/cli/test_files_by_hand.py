"""Atomic writes and output checks (prefixsim/cli/files.py), called directly on folders the
tests lay out: staging names, permissions under the umask, what a failed write leaves, the
errors that name the output, fresh folder names and moving into a folder."""

import errno
import os
from pathlib import Path

import pytest

from prefixsim.cli import files
from prefixsim.cli.files import (
    check_output_dir,
    check_output_file,
    placing,
    write_file,
    write_folder,
    write_text,
)
from prefixsim.errors import InputError


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_a_file_appears_whole_with_the_umask_mode_and_no_staging_left(tmp_path, umask_022):
    target = tmp_path / "new" / "deeper" / "out.txt"
    seen = []

    def write(temp):
        seen.append(temp)
        assert temp.parent == target.parent and not target.exists()
        temp.write_text("hello")

    write_file(target, write)
    assert target.read_text() == "hello"
    assert seen[0].name.startswith(".out.txt.")
    assert (target.stat().st_mode & 0o777) == 0o644
    assert sorted(p.name for p in target.parent.iterdir()) == ["out.txt"]
    os.umask(0o077)
    write_text(target, "again")
    assert target.read_text() == "again" and (target.stat().st_mode & 0o777) == 0o600


def test_a_long_name_keeps_sixty_characters_in_its_staging_name(tmp_path):
    target = tmp_path / ("a" * 100 + ".txt")
    names = []
    write_file(target, lambda temp: names.append(temp.name) or temp.write_text("x"))
    assert names[0].startswith("." + "a" * 60 + ".")
    assert not names[0].startswith("." + "a" * 61)


def test_a_failing_write_leaves_the_old_file_and_no_staging(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("old")

    def broken(temp):
        temp.write_text("half")
        raise RuntimeError("stop")

    with pytest.raises(RuntimeError, match="stop"):
        write_file(target, broken)
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_an_os_error_without_a_file_name_names_the_output(tmp_path):
    target = tmp_path / "out.txt"

    def full(temp):
        raise OSError(errno.ENOSPC, "disk full")

    with pytest.raises(OSError) as error:
        write_file(target, full)
    assert (error.value.errno, error.value.strerror, error.value.filename) == (
        errno.ENOSPC, os.strerror(errno.ENOSPC), str(target))
    assert list(tmp_path.iterdir()) == []


def test_writing_onto_a_folder_is_refused_naming_it(tmp_path):
    folder = tmp_path / "taken"
    (folder / "inside").mkdir(parents=True)
    with pytest.raises(InputError) as error:
        write_text(folder, "x")
    assert (error.value.message, error.value.file) == ("is a folder, expected a file name",
                                                       str(folder))
    assert [p.name for p in tmp_path.iterdir()] == ["taken"]


@pytest.mark.parametrize(("number", "kind", "message"), [
    (errno.ENOENT, InputError, f"cannot write here ({os.strerror(errno.ENOENT)})"),
    (errno.EXDEV, InputError, f"cannot write here ({os.strerror(errno.EXDEV)})"),
    (errno.EEXIST, InputError, f"cannot write here ({os.strerror(errno.EEXIST)})"),
    (errno.ENOSPC, OSError, None),   # the disk's refusal: an OSError naming the output
    (errno.EIO, OSError, None),      # not a place error: raised again naming the output
])
def test_placing_turns_place_errors_into_input_errors(tmp_path, number, kind, message):
    target = tmp_path / "out"
    with pytest.raises(kind) as error, placing(target):
        raise OSError(number, os.strerror(number), "/tmp/.out.staging")
    if kind is InputError:
        assert (error.value.message, error.value.file) == (message, str(target))
    else:
        assert not isinstance(error.value, InputError)
        assert (error.value.errno, error.value.filename) == (number, str(target))
    target.mkdir()
    with pytest.raises(InputError) as error, placing(target):
        raise OSError(errno.EISDIR, "Is a directory")
    assert error.value.message == "is a folder, expected a file name"
    with pytest.raises(InputError) as error, placing(tmp_path / "absent"):
        raise OSError(errno.EISDIR, "Is a directory")
    assert error.value.message == "cannot write here (Is a directory)"


def test_output_checks_word_for_word(tmp_path):
    a_file = tmp_path / "file"
    a_file.write_text("x")
    with pytest.raises(InputError) as error:
        check_output_dir(a_file)
    assert (error.value.message, error.value.file) == ("exists and is not a folder",
                                                       str(a_file))
    with pytest.raises(InputError) as error:
        check_output_dir(a_file / "sub" / "out")
    assert error.value.message == f"cannot write here: {a_file} is not a folder"
    assert error.value.file == str(a_file / "sub" / "out")
    with pytest.raises(InputError) as error:
        check_output_file(tmp_path)
    assert error.value.message == "is a folder, expected a file name"
    with pytest.raises(InputError) as error:
        check_output_file(a_file / "x.html")
    assert error.value.message == f"cannot write here: {a_file} is not a folder"
    long = "b" * 256
    with pytest.raises(InputError) as error:
        check_output_dir(tmp_path / long / "out")
    assert error.value.message == f"a name longer than 255 bytes ({'b' * 20}...)"
    assert error.value.file == str(tmp_path / long / "out")
    with pytest.raises(InputError, match="longer than 255 bytes"):
        check_output_file(tmp_path / long)
    # 255 bytes is allowed; so are folders still to be made under a writable one
    check_output_dir(tmp_path / ("b" * 255) / "new" / "out")
    check_output_file(tmp_path / "new" / "out.html")
    check_output_dir(tmp_path)
    # a name of 128 two-byte characters is 256 bytes
    with pytest.raises(InputError, match="longer than 255 bytes"):
        check_output_file(tmp_path / ("é" * 128))


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write into any folder")
def test_a_folder_without_write_permission_is_refused(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    with pytest.raises(InputError, match=f"no write permission in {locked}"):
        check_output_dir(locked / "out")


def fill_with(**contents):
    def fill(staging):
        for name, text in contents.items():
            (staging / name).write_text(text)
    return fill


def test_a_new_folder_is_the_staging_folder_renamed(tmp_path, umask_022):
    out = tmp_path / "a" / "results"
    assert write_folder(out, fill_with(x="1", y="2"), frozenset()) == out
    assert sorted(p.name for p in out.iterdir()) == ["x", "y"]
    assert (out.stat().st_mode & 0o777) == 0o755
    assert [p.name for p in out.parent.iterdir()] == ["results"]


def test_writing_into_a_folder_replaces_owned_files_and_keeps_the_rest(tmp_path):
    out = tmp_path / "results"
    out.mkdir()
    for name in ("x", "stale", "notes.txt"):
        (out / name).write_text("old")
    assert write_folder(out, fill_with(x="new"), frozenset({"x", "stale", "gone"})) == out
    assert {p.name: p.read_text() for p in out.iterdir()} == {"x": "new", "notes.txt": "old"}
    assert [p.name for p in tmp_path.iterdir()] == ["results"]


def test_fresh_folders_take_the_next_free_name(tmp_path, monkeypatch):
    out = tmp_path / "run"
    assert write_folder(out, fill_with(a="1"), frozenset(), fresh=True) == out
    assert write_folder(out, fill_with(a="2"), frozenset(), fresh=True) == tmp_path / "run-2"
    (tmp_path / "run-3").symlink_to(tmp_path / "nowhere")    # a dangling link is taken
    (tmp_path / "run-4").write_text("a file")                  # so is a file
    assert write_folder(out, fill_with(a="5"), frozenset(), fresh=True) == tmp_path / "run-5"
    assert (tmp_path / "run-5" / "a").read_text() == "5"
    assert (out / "a").read_text() == "1"
    monkeypatch.setattr(files, "MAX_FRESH_NAMES", 5)
    with pytest.raises(InputError) as error:
        write_folder(out, fill_with(a="6"), frozenset(), fresh=True)
    assert (error.value.message, error.value.file) == (
        "5 results folders of this name already exist", str(out))
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "run", "run-2", "run-3", "run-4", "run-5"]


def test_a_failing_fill_removes_its_staging_and_the_folders_it_made(tmp_path):
    (tmp_path / "kept").mkdir()
    out = tmp_path / "kept" / "new" / "deeper" / "results"

    def broken(staging):
        (staging / "half").write_text("x")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_folder(out, broken, frozenset())
    assert list((tmp_path / "kept").iterdir()) == []
    # a folder the fill did not make, or one that is not empty, stays
    (tmp_path / "kept" / "new").mkdir()
    (tmp_path / "kept" / "new" / "other").write_text("x")
    with pytest.raises(KeyboardInterrupt):
        write_folder(out, broken, frozenset())
    assert [p.name for p in (tmp_path / "kept" / "new").iterdir()] == ["other"]


def test_a_staging_folder_names_the_output_on_os_errors(tmp_path):
    out = tmp_path / "results"

    def full(staging):
        raise OSError(errno.ENOSPC, "no space")

    with pytest.raises(OSError) as error:
        write_folder(out, full, frozenset())
    assert error.value.filename == str(out) and error.value.errno == errno.ENOSPC
    assert list(tmp_path.iterdir()) == []
    assert isinstance(Path(error.value.filename), Path)


def test_errors_name_the_output_not_its_parent(tmp_path):
    a_file = tmp_path / "file"
    a_file.write_text("x")
    for call, target in [(lambda: write_text(a_file / "x.txt", "y"), a_file / "x.txt"),
                         (lambda: write_folder(a_file / "out", fill_with(a="1"), frozenset()),
                          a_file / "out")]:
        with pytest.raises(InputError) as error:
            call()
        assert error.value.file == str(target)
        assert error.value.message.startswith("cannot write here (")
    with pytest.raises(InputError) as error:
        check_output_file(tmp_path)
    assert error.value.file == str(tmp_path)
    with pytest.raises(InputError) as error:
        check_output_file(a_file / "x.html")
    assert error.value.file == str(a_file / "x.html")


def test_a_folder_without_write_and_search_permission_is_refused(tmp_path, monkeypatch):
    asked = []

    def access(path, mode):
        asked.append(mode)
        return mode == os.F_OK

    monkeypatch.setattr(files.os, "access", access)
    with pytest.raises(InputError) as error:
        check_output_file(tmp_path / "out.html")
    assert (error.value.message, error.value.file) == (
        f"cannot write here: no write permission in {tmp_path}", str(tmp_path / "out.html"))
    assert asked == [os.W_OK | os.X_OK]


def test_the_staging_folder_is_a_hidden_sibling(tmp_path):
    out = tmp_path / ("r" * 80)
    seen = []
    write_folder(out, lambda staging: seen.append(staging), frozenset())
    assert seen[0].parent == tmp_path
    assert seen[0].name.startswith("." + "r" * 60 + ".")


def test_a_fill_that_removed_its_staging_raises_its_own_error(tmp_path):
    def fill(staging):
        staging.rmdir()
        raise RuntimeError("fill failed")

    with pytest.raises(RuntimeError, match="fill failed"):
        write_folder(tmp_path / "out", fill, frozenset())


def test_a_made_folder_another_writer_filled_meanwhile_stays(tmp_path):
    out = tmp_path / "new" / "out"

    def fill(staging):
        (staging.parent / "theirs").write_text("x")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_folder(out, fill, frozenset())
    assert [p.name for p in (tmp_path / "new").iterdir()] == ["theirs"]


def race_rename(monkeypatch, *errors):
    """os.rename in files.py failing first with each of `errors` (an errno, or a callable
    making the race and returning one), then renaming."""
    real, left = os.rename, list(errors)

    def rename(source, target):
        if left:
            error = left.pop(0)
            number = error(target) if callable(error) else error
            raise OSError(number, os.strerror(number))
        return real(source, target)

    monkeypatch.setattr(files.os, "rename", rename)


def test_a_folder_another_writer_made_meanwhile_is_written_into(tmp_path, monkeypatch):
    out = tmp_path / "out"

    def another_writer(target):
        Path(target).mkdir()
        (Path(target) / "stale").write_text("old")
        (Path(target) / "theirs").write_text("kept")
        return errno.ENOTEMPTY

    race_rename(monkeypatch, another_writer)
    assert write_folder(out, fill_with(mine="1"), frozenset({"stale", "mine"})) == out
    assert {p.name: p.read_text() for p in out.iterdir()} == {"mine": "1", "theirs": "kept"}
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_other_rename_failures_are_raised(tmp_path, monkeypatch):
    race_rename(monkeypatch, errno.EXDEV)
    with pytest.raises(OSError) as error:
        write_folder(tmp_path / "a", fill_with(x="1"), frozenset())
    assert error.value.errno == errno.EXDEV
    # the name taken meanwhile by a file, not a folder: nothing to write into
    def a_file_meanwhile(target):
        Path(target).write_text("a file")
        return errno.EEXIST

    race_rename(monkeypatch, a_file_meanwhile)
    with pytest.raises(OSError) as error:
        write_folder(tmp_path / "b", fill_with(x="1"), frozenset())
    assert error.value.errno == errno.EEXIST  # the rename's own error, nothing moved
    assert (tmp_path / "b").read_text() == "a file"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b"]


def test_a_fresh_name_filled_meanwhile_moves_on_to_the_next(tmp_path, monkeypatch):
    monkeypatch.setattr(files, "MAX_FRESH_NAMES", 3)
    (tmp_path / "run").mkdir()
    race_rename(monkeypatch, errno.ENOTEMPTY)          # run-2 filled by another run
    assert write_folder(tmp_path / "run", fill_with(a="1"), frozenset(), fresh=True) == \
        tmp_path / "run-3"
    race_rename(monkeypatch, errno.EIO)
    with pytest.raises(OSError):
        write_folder(tmp_path / "other", fill_with(a="1"), frozenset(), fresh=True)
