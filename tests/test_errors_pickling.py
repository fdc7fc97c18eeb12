"""Every exception minibert defines survives ``pickle``: the same class, ``args``, message and
attributes. Ray hands an actor's error to the driver as a pickle (so does multiprocessing); an
``__init__`` that takes more than the message (``TaskArgumentError(parameter, value, allowed)``)
could not be rebuilt from it, and Ray raised ``UnserializableException`` in place of the
documented ``ValueError``: ``EmbedBatch(model, prompt_name="nope")`` in an actor did that.

The sweep imports every module of the package and finds every exception class in it, so a new
class is checked without being listed here; one whose ``__init__`` takes other arguments than a
message needs an example in ``EXAMPLES`` (the test says so)."""

from __future__ import annotations

import errno
import importlib
import inspect
import pickle
import pkgutil

import pytest

import minibert

# What each class with an __init__ of its own is made with (the others: a message alone).
EXAMPLES = {
    "NoFileInTime": (30.0, [429], 61.0),
    "MissingHeadsError": ("x.safetensors has no classifier.", "Pass new_heads=True.", True),
    "PromptFillsMaxLengthError": ("the prompt fills max_length=5", "query: ", 5, 5),
    "TaskArgumentError": ("max_length", 100000, "an int from 3 to 512"),
    "ExplorerArgumentError": ("top_k", 50, "an int from 1 to the vocabulary's 15"),
    "FileWriteError": (errno.ENOSPC, "cannot write out.jsonl: No space left on device"),
    "QuestionTooLongError": (2, 130, 128, 64, True),
    "TooLongError": (3, 600, 512, "pass truncate=True"),
    "RequestError": (413, "input 0 is too long", "input", "too_long"),
    "_TooLong": (600, "the tokenizer cannot cut it"),
    "TextCutWarning": (0, 700, 512),
    "_Stopped": (15,),
}
OPTIONAL = ("starlette", "uvicorn", "ray", "pyarrow", "pandas", "transformers")  # extras a module may import


def exception_classes() -> dict[str, type]:
    """{module.Class: class} for every exception class defined in the package's modules."""
    found = {}
    for module_info in pkgutil.walk_packages(minibert.__path__, "minibert."):
        if module_info.name == "minibert.__main__":  # importing it runs the command
            continue
        try:
            module = importlib.import_module(module_info.name)
        except ImportError as error:  # an optional extra not installed: its module's classes are not here
            if (error.name or "").split(".")[0] in OPTIONAL:
                continue
            raise
        for value in vars(module).values():
            if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == module.__name__:
                found[f"{value.__module__}.{value.__qualname__}"] = value
    return found


CLASSES = exception_classes()


def test_the_sweep_finds_the_classes_that_could_not_be_pickled():
    names = {name.rsplit(".", 1)[1] for name in CLASSES}
    assert {"TaskArgumentError", "PromptFillsMaxLengthError", "MissingHeadsError", "MinibertError"} <= names
    assert len(CLASSES) > 25, sorted(CLASSES)


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_every_minibert_exception_survives_pickle(name):
    cls = CLASSES[name]
    short = name.rsplit(".", 1)[1]
    own_init = any("__init__" in vars(base) for base in cls.__mro__ if base.__module__.startswith("minibert"))
    assert short in EXAMPLES or not own_init, f"{name} has an __init__ of its own: give EXAMPLES its arguments"
    error = cls(*EXAMPLES.get(short, (f"{short}: a message naming the file",)))
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is cls
    assert copy.args == error.args
    assert str(copy) == str(error)
    assert vars(copy) == vars(error)  # the data a command reads (parameter, value, allowed ...)
    if isinstance(error, OSError):
        assert (copy.errno, copy.strerror) == (error.errno, error.strerror)
