"""`minibert serve`'s settings and start: an empty --served-model-name, --api-key or --host is a usage
error, a key no client can send is refused, the key is kept out of repr, an IPv6 host in brackets, the
model id of a folder named any way, a port in use; and the serve extra: not imported by
`import minibert`, and a missing library of it named."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")


def test_an_empty_served_model_name_is_a_usage_error(capsys):
    """--served-model-name "$NAME" with the variable unset served the directory's name silently; an
    empty --model is a usage error, and so is this now (exit 2, one line)."""
    from minibert.apps.cli import main

    with pytest.raises(SystemExit) as stopped:
        main(["serve", "--model", "x", "--served-model-name", ""])
    assert stopped.value.code == 2
    assert capsys.readouterr().err.splitlines() == [
        "minibert: error: argument --served-model-name: is empty: give the model id clients send, or leave the "
        "flag out (the directory's name) (see 'minibert serve --help')"]  # fmt: skip


@pytest.mark.parametrize("flag, value, words", [
    ("--api-key", "", "is empty: give the key clients must send, or leave the flag out"),  # was: an open server
    ("--api-key", "  ", "is empty"),
    ("--api-key", "key ", "has spaces at its start or end"),  # (could never match a client's)
    ("--host", "", "is empty: give an address"),  # was exit 1: "cannot listen on :8080: Name or service not known"
])  # fmt: skip
def test_an_empty_api_key_or_host_is_a_usage_error(capsys, monkeypatch, flag, value, words):
    """--api-key "$KEY" with the variable unset fell through to no key: a server open to anyone,
    said only in the usual "no API key" line. Like an empty --model, it is a usage error (exit 2)."""
    from minibert.apps.cli import main

    monkeypatch.delenv("MINIBERT_API_KEY", raising=False)
    with pytest.raises(SystemExit) as stopped:
        main(["serve", "--model", "x", flag, value])
    assert stopped.value.code == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"minibert: error: argument {flag}: {words}"), line


@pytest.mark.parametrize("value", ["  ", "key\n", " key"])
def test_an_api_key_in_the_environment_that_no_client_can_send_is_refused(capsys, monkeypatch, value):
    """$MINIBERT_API_KEY with spaces at either end (a key file read with its newline) started a
    server whose every request was refused: no client's 'Bearer KEY' carries them. The variable is
    --api-key's default, so, as a bad --api-key, a usage error: one line, exit 2."""
    from minibert.apps.cli import main

    monkeypatch.setenv("MINIBERT_API_KEY", value)
    assert main(["serve", "--model", "x"]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("minibert: error: MINIBERT_API_KEY "), line
    if value.strip():
        assert "has spaces at its start or end" in line, line
    else:  # (there is no flag to leave out: the variable is named, and unset)
        assert "holds only spaces" in line and line.endswith("or unset it (an empty MINIBERT_API_KEY counts as "
                                                             "unset)"), line  # fmt: skip
        assert "flag" not in line, line


def test_the_api_key_is_not_in_the_settings_repr():
    """HubOptions.token is left out of its repr; ServeSettings.api_key was shown in full."""
    from minibert.apps.serve.settings import ServeSettings

    assert "s3cret" not in repr(ServeSettings(model="m", api_key="s3cret"))


def test_an_ipv6_host_in_brackets_as_the_server_writes_it_is_taken():
    """The server writes http://[::1]:8080; --host "[::1]" was exit 1 ("Name or service not known")."""
    import argparse

    from minibert.apps.serve.settings import add_serve_flags, settings_from

    parser = argparse.ArgumentParser()
    add_serve_flags(parser)
    assert settings_from(parser.parse_args(["--model", "m", "--host", "[::1]"])).host == "::1"


def test_a_model_folder_is_served_under_its_own_name_whatever_path_names_it(tmp_path, monkeypatch):
    """docs/serving.md: the model id is by default "the directory's name"; --model . served the id
    ".", and a client sending the directory's name got 404."""
    from minibert.apps.serve.service import EmbeddingService
    from minibert.apps.serve.settings import ServeSettings

    (tmp_path / "tiny" / "sub").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "tiny" / "sub")
    for model in (".", "./", "..", "../", "../sub/..", str(tmp_path / "tiny") + "/", "sentence-transformers/tiny"):
        expected = "sub" if model in (".", "./") else "tiny"
        assert EmbeddingService(ServeSettings(model=model)).model_id == expected, model


def test_a_port_in_use_is_one_error_line_and_exit_1(minilm_dir):
    """uvicorn's own bind error used to come after a "serving on" line, with exit status 3."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run([sys.executable, "-m", "minibert", "serve", "--model", str(minilm_dir), "--port",
                                 str(port)], capture_output=True, text=True, timeout=120)  # fmt: skip
    assert result.returncode == 1, result.stderr
    assert result.stderr.splitlines() == [f"minibert: error: cannot listen on 127.0.0.1:{port}: the port is in use"]


def test_import_minibert_does_not_import_the_server_stack():
    code = ("import sys, minibert; minibert.Embedder; "
            "print([m for m in ('uvicorn', 'starlette', 'fastapi', 'httpx') if m in sys.modules])")  # fmt: skip
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "[]"


@pytest.mark.parametrize("missing", ["starlette", "uvicorn", "h11"])
def test_serve_without_a_library_of_the_extra_names_the_extra(missing):
    """Any library of the serve extra missing (uvicorn without starlette's, as FastAPI users have it) is
    the one line naming the extra, exit 1, before the model loads: not "internal error"."""
    program = (f"import sys; sys.modules[{missing!r}] = None; from minibert.apps.cli import main; "
               "sys.exit(main(['serve', '--model', 'minibert/fortunes-mini', '--port', '0']))")  # fmt: skip
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    assert result.returncode == 1, result.stderr
    assert result.stderr.splitlines() == [f"minibert: error: minibert serve needs the serve extra ({missing} is not "
                                          "installed): pip install 'minibert[serve]'"]  # fmt: skip
