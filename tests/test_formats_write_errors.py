"""Every write error names the file being written (issue 45, item 6): a full disk used to give
"[Errno 28] No space left on device" and nothing else (vocab, pretraining-data, pretrain). Every
file minibert writes goes through formats/atomic_files.py (or the metrics' append, which uses the
same guard), so that is where the error is named. A real ENOSPC comes from /dev/full (the kernel's
always-full device); permission and read-only errors are simulated (the tests run as root, whom a
read-only folder does not stop), as is a full disk in the middle of a command."""

from __future__ import annotations

import builtins
import errno
import os
import re
from pathlib import Path

import pytest

from helpers import run_minibert
from minibert.errors import FileWriteError
from minibert.formats import atomic_files
from minibert.formats.atomic_files import naming_the_file, write_atomically
from minibert.formats.tfrecord import read_examples
from minibert.training.run import checkpoint
from random_instances import random_instances, write_instances

TINY = "tests/data/tiny_hub"


def failing(code: int, filename=None):
    def fail(*args, **kwargs):
        raise OSError(code, os.strerror(code), filename)

    return fail


def test_a_real_full_disk_is_named():
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    with pytest.raises(FileWriteError) as caught:
        with naming_the_file("/dev/full"), open("/dev/full", "wb") as handle:
            handle.write(b"x" * 10)
    assert str(caught.value) == "cannot write /dev/full: No space left on device"
    assert caught.value.errno == errno.ENOSPC and isinstance(caught.value, OSError)


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT, errno.EIO])
def test_a_full_disk_while_writing_names_the_file_and_leaves_nothing(tmp_path, monkeypatch, code):
    target = tmp_path / "vocab.txt"
    monkeypatch.setattr(os, "fsync", failing(code))
    with pytest.raises(FileWriteError, match=f"^cannot write {target}: {os.strerror(code)}$"):
        write_atomically(target, b"[PAD]\n")
    assert list(tmp_path.iterdir()) == []  # no target, no temporary file


@pytest.mark.parametrize("code", [errno.EACCES, errno.EROFS, errno.EPERM])
def test_a_folder_that_cannot_be_written_is_named_with_the_file(tmp_path, monkeypatch, code):
    target = tmp_path / "model.safetensors"
    temporary = str(tmp_path / ".model.safetensors.x1y2.partial")  # the name mkstemp was making
    monkeypatch.setattr(atomic_files.tempfile, "mkstemp", failing(code, temporary))
    with pytest.raises(FileWriteError, match=f"^cannot write {target}: {os.strerror(code)}$"):
        write_atomically(target, b"x")


def test_a_folder_that_takes_no_new_file_is_said_of_the_folder_not_the_temporary_file(tmp_path):
    """/proc exists, but creating a file there gives ENOENT: the error named the temporary
    ".x.html.XXXX.partial" the user never gave, and "No such file or directory" of a folder that is
    there. A folder removed meanwhile "does not exist"."""
    if not os.path.isdir("/proc/self"):
        pytest.skip("no /proc here")
    with pytest.raises(FileWriteError) as caught:
        write_atomically("/proc/x.html", b"x")
    expected = "cannot write /proc/x.html: the folder /proc takes no new file (No such file or directory)"
    assert str(caught.value) == expected
    assert caught.value.errno == errno.ENOENT and ".partial" not in str(caught.value)
    gone = tmp_path / "gone" / "page.html"
    with pytest.raises(FileWriteError, match=f"^cannot write {gone}: the folder {gone.parent} does not exist$"):
        with naming_the_file(gone), open(gone, "wb"):
            pass


@pytest.mark.parametrize("what", ["model", "config", "tokenizer"])
def test_save_pretrained_into_what_cannot_be_a_folder_names_why(tmp_path, vocab_file, what):
    """``model.save_pretrained(path)`` raised the bare OSErrors of mkdir, where ``config.save_pretrained``
    named the problem: FileExistsError "File exists" for a path that is a file (the file is not the
    problem; that it is no folder is), NotADirectoryError for a folder under a file, FileNotFoundError
    for a folder that cannot be made. All say it, in one FileWriteError, and write nothing: the
    tokenizer's too (it raised a NotADirectoryError of its own for a file, and mkdir's for the others)."""
    import minibert

    config = minibert.BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                                 intermediate_size=37)  # fmt: skip
    saving = {"model": lambda: minibert.BertModel(config), "config": lambda: config,
              "tokenizer": lambda: minibert.BertTokenizer(vocab_file)}[what]()  # fmt: skip
    files = {"model": "model.safetensors and config.json", "config": "config.json",
             "tokenizer": "vocab.txt, tokenizer_config.json and special_tokens_map.json"}[what]  # fmt: skip
    first = files.split()[0].rstrip(",")  # the first file named
    (tmp_path / "afile").write_text("x")
    cases = [(tmp_path / "afile", f"cannot save {files} into {tmp_path / 'afile'}: it is a file, not a directory"),
             (tmp_path / "afile" / "sub", f"cannot save {files} into {tmp_path / 'afile' / 'sub'}: it does not exist "
                                          f"({tmp_path / 'afile'} is a file, not a directory)")]  # fmt: skip
    if os.path.isdir("/proc/self"):
        cases.append((Path("/proc/nope"), f"cannot write /proc/nope/{first}: the folder /proc/nope does not exist"))
    for directory, said in cases:
        with pytest.raises(FileWriteError, match=f"^{re.escape(said)}$"):
            saving.save_pretrained(directory)
    assert (tmp_path / "afile").read_text() == "x" and sorted(tmp_path.iterdir()) == [tmp_path / "afile"]


@pytest.mark.parametrize("command", ["convert", "example-data", "finetune"])
def test_an_output_folder_in_a_read_only_parent_is_one_line_naming_it(tmp_path, monkeypatch, command):
    """Commands whose --output is a folder (convert's staging folder, example-data's and a run's
    mkdir) said "[Errno 30] Read-only file system: '…/.conv.xxxx.partial'", naming a temporary
    folder the user never gave, or gave a raw errno; now one line naming the output and why. The
    folder is made before any model is read (convert read the weights first)."""
    from minibert.apps import convert

    output = tmp_path / "out"
    monkeypatch.setattr(convert.tempfile, "mkdtemp", failing(errno.EROFS, str(tmp_path / ".out.ab12.partial")))
    real_mkdir = type(tmp_path).mkdir

    def mkdir(self, *args, **kwargs):
        if self == output:
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(self))
        return real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(type(tmp_path), "mkdir", mkdir)
    train = tmp_path / "train.csv"
    train.write_text("text,label\na good film,1\na bad film,0\n", encoding="utf-8")
    argv = {
        "convert": ["convert", TINY, str(output)],
        "example-data": ["example-data", "languages", "--output", str(output)],
        "finetune": ["finetune", "--model", TINY, "--train", str(train), "--output", str(output)],
    }[command]
    result = run_minibert(*argv)
    errors = [line for line in result.stderr.splitlines() if "error" in line]
    assert result.returncode == 1 and errors == [f"minibert: error: cannot write {output}: Read-only file system"], \
        result.stderr  # fmt: skip
    assert ".partial" not in result.stderr and "Errno" not in result.stderr


def test_a_read_only_target_when_renaming_is_named(tmp_path, monkeypatch):
    target = tmp_path / "config.json"
    monkeypatch.setattr(atomic_files.os, "replace", failing(errno.EROFS))
    with pytest.raises(FileWriteError, match="^cannot write .*config.json: Read-only file system$"):
        write_atomically(target, b"{}")
    assert list(tmp_path.iterdir()) == []


def test_an_error_about_another_file_passes_unchanged(tmp_path):
    with pytest.raises(PermissionError) as caught:
        with atomic_files.atomic_output(tmp_path / "out.txt"):
            raise PermissionError(errno.EACCES, "Permission denied", "/some/input.txt")
    assert not isinstance(caught.value, FileWriteError) and caught.value.filename == "/some/input.txt"


def _kind_stat(target, kind: int):
    """os.stat, but ``target`` seems to be of ``kind`` (stat.S_IFCHR ...): no real device is touched."""
    real_stat = os.stat

    def fake(path, *args, **kwargs):
        found = real_stat(path, *args, **kwargs)
        return os.stat_result((kind | 0o666, *tuple(found)[1:])) if os.fspath(path) == os.fspath(target) else found

    return fake


@pytest.mark.parametrize("kind", ["FIFO", "directory", "socket", "character device", "block device"])
def test_what_is_not_a_regular_file_is_never_replaced(tmp_path, monkeypatch, kind):
    # `--output /dev/null` as root made /dev/null a regular file: os.replace goes over anything.
    import socket
    import stat

    target = tmp_path / "out.bin"
    if kind == "FIFO":
        os.mkfifo(target)
    elif kind == "directory":
        target.mkdir()
    elif kind == "socket":
        target = tmp_path / "s"  # a socket's path is at most 107 bytes
        with socket.socket(socket.AF_UNIX) as server:
            server.bind(str(target))  # the socket's node stays when it is closed
        monkeypatch.chdir(tmp_path)
        target = target.relative_to(tmp_path)
    else:
        target.write_bytes(b"")  # seen as a device through a stubbed stat
        code = stat.S_IFCHR if kind == "character device" else stat.S_IFBLK
        monkeypatch.setattr(atomic_files.os, "stat", _kind_stat(target, code))
    before = os.lstat(target)
    with pytest.raises(FileWriteError, match=f"^cannot write {target}: it is a {kind}.*, not a regular file"):
        write_atomically(target, b"data")
    after = os.lstat(target)
    assert (after.st_ino, after.st_mode, after.st_size) == (before.st_ino, before.st_mode, before.st_size)
    assert sorted(p.name for p in tmp_path.iterdir()) == [os.path.basename(target)]  # no temporary file left


def one_error_line(result) -> str:
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines[-1].startswith("minibert: error: "), lines
    return lines[-1]


def test_pretrain_on_a_full_disk_names_the_checkpoint_file(tmp_path, monkeypatch):
    data = write_instances(tmp_path / "data.tfrecord", random_instances(8, vocab_size=111, seq_len=16))
    monkeypatch.setattr(os, "fsync", failing(errno.ENOSPC))
    result = run_minibert("pretrain", "--data", str(data), "--init", TINY, "--output", str(tmp_path / "run"),
                          "--steps", "1", "--batch-size", "4")  # fmt: skip
    assert one_error_line(result) == (f"minibert: error: cannot write {tmp_path / 'run' / 'training_state.pt'}: "
                                      "No space left on device")  # fmt: skip


def test_pretrain_whose_metrics_meet_a_full_disk_names_metrics_jsonl(tmp_path, monkeypatch):
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    data = write_instances(tmp_path / "data.tfrecord", random_instances(8, vocab_size=111, seq_len=16))

    def full(path, *args, **kwargs):  # the metrics' appends go to the kernel's full device
        return builtins.open("/dev/full", *args, **kwargs)

    monkeypatch.setattr(checkpoint, "open", full, raising=False)
    run = tmp_path / "run"
    result = run_minibert("pretrain", "--data", str(data), "--init", TINY, "--output", str(run),
                          "--steps", "1", "--batch-size", "4")  # fmt: skip
    assert one_error_line(result) == f"minibert: error: cannot write {run / 'metrics.jsonl'}: No space left on device"


def test_vocab_on_a_full_disk_names_the_vocabulary_file(tmp_path, monkeypatch):
    text = tmp_path / "text.txt"
    text.write_text("the cat sat on the mat\n\nthe dog sat on the log\n" * 20)
    (tmp_path / "vocab").mkdir()
    monkeypatch.setattr(os, "fsync", failing(errno.ENOSPC))
    result = run_minibert("vocab", "--input", str(text), "--output", str(tmp_path / "vocab"), "--vocab-size", "60")
    line = one_error_line(result)
    assert line.startswith(f"minibert: error: cannot write {tmp_path / 'vocab'}") and "No space left" in line, line


def _folder(path) -> dict:
    """Every entry of a folder (hidden ones too) and its bytes."""
    return {entry.name: entry.read_bytes() for entry in sorted(path.iterdir())}


def failing_on(function, nth: int, code: int):
    """``function``, but its ``nth`` call (1-based) fails with ``code``."""
    calls = []

    def fail(*args, **kwargs):
        calls.append(args)
        if len(calls) == nth:
            raise OSError(code, os.strerror(code))
        return function(*args, **kwargs)

    return fail


def _learn(folder, text, *flags) -> object:
    return run_minibert("vocab", "--input", str(text), "--output", str(folder), "--vocab-size", "60", *flags)


@pytest.fixture
def vocabulary(tmp_path):
    """A folder holding a lowercasing vocabulary (vocab.txt and its tokenizer_config.json), and a text."""
    text = tmp_path / "text.txt"
    text.write_text("The Cat sat on the Mat\n\nthe Dog sat on the Log\n" * 20)
    (tmp_path / "vocab").mkdir()
    assert _learn(tmp_path / "vocab", text).returncode == 0
    return tmp_path / "vocab", text


def test_vocab_whose_config_meets_a_full_disk_leaves_the_old_pair(vocabulary, monkeypatch):
    """vocab wrote vocab.txt, then tokenizer_config.json: a full disk at the second left a new cased
    vocab.txt beside the old lowercasing config, which tokenizes the cased pieces away. Both files are
    now on disk before either is renamed into place."""
    folder, text = vocabulary
    before = _folder(folder)
    monkeypatch.setattr(os, "fsync", failing_on(os.fsync, 2, errno.ENOSPC))  # the second file's
    line = one_error_line(_learn(folder, text, "--cased"))
    assert line == f"minibert: error: cannot write {folder / 'tokenizer_config.json'}: No space left on device"
    assert _folder(folder) == before  # the old pair, and no temporary file


@pytest.mark.parametrize("failure", ["immutable", "Ctrl-C"])
def test_vocab_whose_second_rename_fails_puts_the_first_file_back(vocabulary, monkeypatch, failure):
    """`chattr +i tokenizer_config.json` (or Ctrl-C between the two renames): vocab.txt was already
    replaced. It is put back, so the folder still holds the pair that tokenizes as before."""
    from transformers import BertTokenizer as Reference

    folder, text = vocabulary
    before = _folder(folder)
    expected = Reference.from_pretrained(folder).tokenize("The Cat sat")
    real_replace = os.replace

    def replace(source, destination, *args, **kwargs):
        if os.fspath(destination).endswith("tokenizer_config.json"):
            if failure == "Ctrl-C":
                raise KeyboardInterrupt
            raise OSError(errno.EPERM, os.strerror(errno.EPERM), os.fspath(source), os.fspath(destination))
        return real_replace(source, destination, *args, **kwargs)

    monkeypatch.setattr(os, "replace", replace)
    result = _learn(folder, text, "--cased")
    monkeypatch.undo()
    if failure == "Ctrl-C":
        assert result.returncode == 130, result.stderr
    else:
        assert one_error_line(result) == (f"minibert: error: cannot write {folder / 'tokenizer_config.json'}: "
                                          "Operation not permitted")  # fmt: skip
    assert _folder(folder) == before
    assert Reference.from_pretrained(folder).tokenize("The Cat sat") == expected


def test_vocab_into_a_new_folder_on_a_full_disk_leaves_it_empty(tmp_path, monkeypatch):
    text = tmp_path / "text.txt"
    text.write_text("the cat sat on the mat\n" * 20)
    (tmp_path / "vocab").mkdir()
    monkeypatch.setattr(os, "fsync", failing_on(os.fsync, 2, errno.ENOSPC))
    one_error_line(_learn(tmp_path / "vocab", text))
    assert _folder(tmp_path / "vocab") == {}  # vocab.txt alone used to stay


def test_example_data_on_a_full_disk_leaves_no_part_of_the_set(tmp_path, monkeypatch):
    """example-data squad wrote its four files one by one: a full disk at the third left the two dev
    files in a new folder. Now nothing: not the files, not the folders it made (nor one made before,
    nor a file of the set that was already there)."""
    output = tmp_path / "made" / "squad"
    monkeypatch.setattr(os, "fsync", failing_on(os.fsync, 3, errno.ENOSPC))
    result = run_minibert("example-data", "squad", "--output", str(output))
    assert one_error_line(result).endswith(": No space left on device")
    assert os.listdir(tmp_path) == []

    from minibert.apps.example_data_command import example_files

    output.mkdir(parents=True)
    first = example_files("squad")[0]
    (output / first.name).write_bytes(first.read_bytes())  # already there, the same bytes: left alone
    before = _folder(output)
    monkeypatch.setattr(os, "fsync", failing_on(os.fsync, 2, errno.ENOSPC))
    one_error_line(run_minibert("example-data", "squad", "--output", str(output)))
    assert _folder(output) == before
    monkeypatch.undo()
    assert run_minibert("example-data", "squad", "--output", str(output)).returncode == 0
    assert _folder(output) == {source.name: source.read_bytes() for source in example_files("squad")}


def test_a_symbolic_link_is_written_where_it_points(tmp_path):
    """os.replace over a link replaces the link: the output went to a new file of the link's name and
    the file the link named kept its old bytes. Now the target gets the bytes (and keeps its mode)."""
    import stat

    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "config.json"
    target.write_bytes(b"old")
    os.chmod(target, 0o600)
    link = tmp_path / "config.json"
    link.symlink_to("real/config.json")
    write_atomically(link, b"new")
    assert link.is_symlink() and target.read_bytes() == b"new" and stat.S_IMODE(target.stat().st_mode) == 0o600
    assert os.listdir(tmp_path / "real") == ["config.json"] and sorted(os.listdir(tmp_path)) == ["config.json", "real"]
    nowhere = tmp_path / "to-nowhere.json"
    nowhere.symlink_to("missing/file.json")  # the folder that is not there is the target's, not the link's
    with pytest.raises(FileWriteError, match=f"cannot write {nowhere}: the folder {tmp_path / 'missing'} does not"):
        write_atomically(nowhere, b"new")


@pytest.fixture
def shards(tmp_path):
    """A corpus, a vocabulary and three shards an earlier run of pretraining-data wrote ("old")."""
    vocab, corpus = tmp_path / "vocab.txt", tmp_path / "corpus.txt"
    vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\ncat\nsat\non\nmat\n.\n", encoding="utf-8")
    corpus.write_text("The cat sat on the mat.\nThe mat sat.\n\nA cat.\nThe cat sat.\nOn the mat.\n" * 20)
    paths = [tmp_path / f"s{shard}.tfrecord" for shard in range(3)]
    for path in paths:
        path.write_bytes(b"old")
    arguments = ["pretraining-data", "--input", str(corpus), "--vocab", str(vocab),
                 "--output", ",".join(map(str, paths)), "--dupe-factor", "1"]  # fmt: skip
    return paths, arguments


# The fsyncs of a 3-shard run: each shard once before any rename (1-3), then atomic_output's own, last shard first.
FSYNC_SHARD = {1: 0, 2: 1, 3: 2, 4: 2, 5: 1, 6: 0}


@pytest.mark.parametrize("failure", ["Ctrl-C", "ENOSPC"])
@pytest.mark.parametrize("nth", list(FSYNC_SHARD))
def test_pretraining_data_shards_are_replaced_together_or_not_at_all(shards, monkeypatch, nth, failure):
    """Each shard was fsync'ed and renamed in its own exit, one after the other: Ctrl-C or a full disk
    at the third fsync left s1 and s2 new beside an old s0 (a later pretrain trained on two runs'
    shards) while the command said "no output file was written". Now every shard is on disk before
    the first rename, and a rename interrupted puts the renamed shards back."""
    paths, arguments = shards
    calls = []

    def fsync(descriptor):
        calls.append(descriptor)
        if len(calls) == nth:
            if failure == "Ctrl-C":
                raise KeyboardInterrupt
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_fsync(descriptor)

    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", fsync)
    result = run_minibert(*arguments)
    if failure == "Ctrl-C":
        assert result.returncode == 130 and "no output file was written" in result.stderr, result.stderr
    else:
        path = paths[FSYNC_SHARD[nth]]
        assert one_error_line(result) == f"minibert: error: cannot write {path}: No space left on device"
    assert sorted(os.listdir(paths[0].parent)) == ["corpus.txt", "s0.tfrecord", "s1.tfrecord", "s2.tfrecord",
                                                   "vocab.txt"]  # fmt: skip
    assert [path.read_bytes() for path in paths] == [b"old"] * 3


@pytest.mark.parametrize("failure", ["immutable", "Ctrl-C"])
def test_pretraining_data_whose_last_rename_fails_puts_the_other_shards_back(shards, monkeypatch, failure):
    paths, arguments = shards
    real_replace = os.replace

    def replace(source, destination, *args, **kwargs):
        if os.fspath(destination) == str(paths[0]) and ".before." not in os.fspath(source):  # s0, renamed last
            if failure == "Ctrl-C":
                raise KeyboardInterrupt
            raise OSError(errno.EPERM, os.strerror(errno.EPERM), os.fspath(source), os.fspath(destination))
        return real_replace(source, destination, *args, **kwargs)

    monkeypatch.setattr(os, "replace", replace)
    result = run_minibert(*arguments)
    assert result.returncode == (130 if failure == "Ctrl-C" else 1), result.stderr
    assert [path.read_bytes() for path in paths] == [b"old"] * 3
    monkeypatch.undo()
    assert run_minibert(*arguments).returncode == 0
    assert all(len(list(read_examples(path))) > 0 for path in paths)  # (then the new shards land, all three)
    assert len(os.listdir(paths[0].parent)) == 5  # no temporary file, no second name left


# Legal file names at the file system's limit (255 bytes): ASCII, and 2-byte characters cut at one.
LONG_NAMES = {"250 bytes": "a" * 241 + ".tfrecord", "255 bytes": "b" * 251 + ".npy", "é × 126": "é" * 126 + ".xy"}


@pytest.mark.parametrize("name", list(LONG_NAMES))
def test_a_long_legal_name_is_written_and_its_temporary_files_fit(tmp_path, name):
    """The temporary file (.NAME.xxxxxxxx.partial, 18 bytes longer) of a 250-byte name was too long:
    "<the temporary file's name>: File name too long", after all the work. Every writer now cuts NAME
    in its hidden names: atomic_output, the second names of files written together, embed's resumable
    output (.NAME.partial, .NAME.resume.json) and convert's staging folder."""
    from minibert.apps.resumable import ResumableOutput
    from minibert.formats.file_sets import write_files_together

    name = LONG_NAMES[name]
    (tmp_path / name).write_bytes(b"old")  # (touch takes it: a legal name)
    write_atomically(tmp_path / name, b"new")
    write_files_together({tmp_path / name: b"newer", tmp_path / "short.txt": b"x"})  # the old file's second name
    assert _folder(tmp_path) == {name: b"newer", "short.txt": b"x"}
    output = ResumableOutput(tmp_path / name, {"run": 1}, lines=True)
    output.start(b"")
    output.write(b"row\n")
    output.commit(1)
    output.close()
    output = ResumableOutput(tmp_path / name, {"run": 1}, lines=True)
    assert output.start(b"") == 1  # resumed
    output.finish()
    output.close()
    assert _folder(tmp_path) == {name: b"row\n", "short.txt": b"x"}


def test_pretraining_data_and_convert_to_a_250_byte_name(tmp_path, shards):
    (_, arguments), name = shards, LONG_NAMES["250 bytes"]
    arguments[arguments.index("--output") + 1] = str(tmp_path / name)
    assert run_minibert(*arguments).returncode == 0
    assert len(list(read_examples(tmp_path / name))) > 0
    (tmp_path / "folder").mkdir()
    assert run_minibert("convert", TINY, str(tmp_path / "folder" / name)).returncode == 0, "convert"
    assert os.listdir(tmp_path / "folder") == [name]


def test_a_name_too_long_for_the_file_system_is_one_line_naming_it_before_the_work(tmp_path, shards, monkeypatch):
    (_, arguments), output = shards, tmp_path / ("c" * 300 + ".tfrecord")
    arguments[arguments.index("--output") + 1] = str(output)
    monkeypatch.setattr(os, "fsync", failing(errno.EIO))  # never reached
    assert one_error_line(run_minibert(*arguments)) == f"minibert: error: cannot write {output}: File name too long"
    with pytest.raises(FileWriteError, match=f"^cannot write {output}: File name too long$"):
        write_atomically(output, b"x")
    with pytest.raises(FileWriteError, match=f"^cannot write {output}: File name too long$"):
        with naming_the_file(output):
            raise OSError(errno.ENAMETOOLONG, os.strerror(errno.ENAMETOOLONG), str(output))


def test_pretraining_data_makes_its_temporary_files_before_it_reads_the_corpus(shards, monkeypatch):
    """A folder that takes no new file (read-only, not the user's) was said after the corpus was read
    and every instance made; the temporary files are now made first, as the early checks intend."""
    from minibert.training.pretraining_data import create

    paths, arguments = shards

    def never(*args, **kwargs):
        raise AssertionError("the corpus was read")

    monkeypatch.setattr(create, "read_documents", never)
    temporary = paths[0].parent / ".s0.tfrecord.x1y2.partial"  # the name mkstemp was making
    monkeypatch.setattr(atomic_files.tempfile, "mkstemp", failing(errno.EACCES, str(temporary)))
    assert one_error_line(run_minibert(*arguments)) == f"minibert: error: cannot write {paths[0]}: Permission denied"


def test_folder_error_takes_its_type_from_what_was_found_not_from_the_words(tmp_path, monkeypatch):
    """Exploration.save chose FileNotFoundError, NotADirectoryError or OSError by the first words of
    why_not_a_folder's sentence: a rewording would have changed the type. folder_error gives the type
    with the words, from the same stat."""
    from minibert.formats.atomic_files import folder_error, why_not_a_folder

    (tmp_path / "afile").write_text("x")
    os.mkfifo(tmp_path / "fifo")
    cases = {tmp_path / "missing": FileNotFoundError, tmp_path / "afile" / "out": FileNotFoundError,
             tmp_path / "afile": NotADirectoryError, tmp_path / "fifo": NotADirectoryError}  # fmt: skip
    for directory, kind in cases.items():
        error = folder_error(directory)
        assert type(error) is kind and str(error) == f"the output directory {directory} {why_not_a_folder(directory)}"
    assert folder_error(tmp_path) is None
    real_stat = os.stat

    def stat(path, *args, **kwargs):
        if Path(path) == tmp_path / "locked":
            raise PermissionError(errno.EACCES, "Permission denied")
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(atomic_files.os, "stat", stat)
    error = folder_error(tmp_path / "locked", "the run")
    assert type(error) is OSError and str(error) == f"the run {tmp_path / 'locked'} cannot be read (Permission denied)"
