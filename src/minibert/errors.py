"""The exceptions minibert raises on purpose.

Every error a user can cause (a bad checkpoint, a missing model, bad input ids) is raised as one of
these, or as a plain ``ValueError`` / ``TypeError`` for malformed arguments, with a message that
names the culprit: the file, the tensor, the limit. Catch ``MinibertError`` to catch them all.

The mistakes a learner makes first (text where ids are expected, a batch where one text is, a file
where a folder is, transformers' module names) raise errors that also subclass the Python type a
user would catch (``TypeError``, ``AttributeError``), and say what was passed, what is expected and
what to write instead.
"""


class PicklableError(Exception):
    """An exception that survives ``pickle``, whatever its ``__init__`` takes. Ray and
    multiprocessing hand an error from one process to another as a pickle, and Python rebuilds an
    exception as ``cls(*error.args)``: the message alone, which an ``__init__`` of more parameters
    (``TaskArgumentError(parameter, value, allowed)``) refuses, so that Ray raised its own
    ``UnserializableException`` in place of the error. This one is rebuilt without calling
    ``__init__`` again: the same class, ``args`` and attributes, so the same message.
    Every minibert exception (``MinibertError`` and the data-carrying ``ValueError``s of the tasks
    and the server) derives from it; tests/test_errors_pickling.py sweeps them all."""

    def __reduce__(self):
        return _rebuilt, (type(self), self.args), self.__dict__ or None


def _rebuilt(cls: type, args: tuple) -> BaseException:
    """``cls`` with ``args``, its ``__init__`` not called (pickle then restores its attributes)."""
    error = cls.__new__(cls, *args)  # (an OSError reads its errno and strerror from args here)
    error.args = args
    return error


class MinibertError(PicklableError):
    """Base class of minibert's own errors."""


class CheckpointError(MinibertError):
    """A checkpoint file (config.json, vocab.txt, weights) is missing, corrupt or does not fit."""


class MissingHeadsError(CheckpointError):
    """The checkpoint lacks the head tensors the class needs (a classifier on an encoder alone).
    ``without_advice`` is what is missing and what the file holds; the message adds how to start
    the head from Python (``new_heads=True``, or labels: ``num_labels=2``); the command line gives
    its own advice (``minibert finetune``)."""

    def __init__(self, without_advice: str, advice: str, only_the_pooler: bool = False):
        super().__init__(f"{without_advice} {advice}")
        self.without_advice = without_advice
        self.only_the_pooler = only_the_pooler  # the pooler is all that is missing (an MLM-trained encoder)


class ModelNotFoundError(CheckpointError):
    """Neither a local directory nor a reachable (or cached) hub repository matches the name; or
    the repository is gated, or private to a token not given; or a file it may hold cannot be had
    (offline, not in the cache: then whether it has the file is unknown, and it is not taken as absent).
    ``refused`` is True where the hub answered and would not give the repository or the file to the
    token sent, or to none (HTTP 401 or 403, gated, private or absent): the hub was reached, so a
    fallback for a hub that cannot be reached (the bundled toy of ``fill_mask``) must not hide it."""

    refused = False


class HubDownloadError(ModelNotFoundError):
    """The hub could not give a file it may well hold: it answered with an error (HTTP 500, 503),
    the connection was refused, dropped mid-transfer or timed out. The message names the repository,
    the file and what happened; nothing is loaded in its place (a file the hub could not give is
    never taken as absent). Trying again later may work."""


class DeviceError(MinibertError):
    """The device asked for is not on this machine (devices.py): a torch built without CUDA, no GPU
    visible, fewer GPUs than the number given (likewise an XPU, Apple's MPS or another kind of torch
    device), a precision the device cannot train in (fp16 on a CPU), or the meta device asked to
    compute (it holds shapes, not numbers). The message names the device and what is missing."""


class InputTypeError(MinibertError, TypeError):
    """An argument of the wrong kind: text where token ids are expected (``model("I love Paris")``),
    a list where one text is (``tokenizer.tokenize(["a", "b"])``). The message names the next step."""


class TextsError(InputTypeError, ValueError):
    """``texts`` that ``Embedder.embed`` cannot read as texts: not a str or a list of str (None, bytes,
    a number, a 0-d array), an unordered collection (a set: its rows could not be matched back), or a
    dict (sentence-transformers' ``{"text": ...}`` form). A TypeError, and a ValueError as well, the
    type sentence-transformers' ``encode`` raises for them ("Unsupported input type"), so that code
    catching either catches it. The message names what to pass."""


class TransformersNameError(MinibertError, AttributeError):
    """A transformers name minibert spells differently: a module (``model.encoder.layer[3]``,
    ``embeddings.LayerNorm``, ``attention.self.query``; the message gives minibert's name, from the
    rename table ``minibert.loading.names.RENAMES``), or a method of the older tutorials that transformers
    itself removed (``tokenizer.encode_plus``; the message gives what replaces it)."""


class DataError(MinibertError):
    """A data file (training text, a vocabulary to train with, pre-training instances) is missing,
    malformed or does not fit the model."""


class FlagConflictError(DataError):
    """Settings that cannot go together, whatever the files hold: ``PretrainOptions``' --init with
    --config, --config without --vocab, a --batch-size that does not split into the processes ×
    --accumulate, --bf16 against --precision, a --vocab or --cased other than the tokenizer --init
    brings; ``FinetuneOptions``' flag its --task (or --write-features) does not read, --glue with the
    other --task, a --batch-size that does not split into the processes. The message names the
    flags. From Python it is a DataError like the data's; the command line says it as a usage error
    (exit 2), as argparse says its own (apps/cli.py), from the one check the library makes: no second
    copy of the checks in the command."""


class TFRecordError(DataError):
    """A TFRecord file is truncated, fails its CRC, or holds a record that is not a tf.train.Example."""


class ExplorerInputError(MinibertError, ValueError):
    """Input the explorer cannot show: an empty text, a text longer than the model's positions
    (without truncation), a bad ``top_k`` (past 100, what a page holds) or ``max_length``, or a
    model whose outputs are NaN or infinite (the message names the first layer and head)."""


class CorpusError(DataError):
    """A text corpus (the input of ``minibert vocab``) cannot be used: a file is missing or
    unreadable, is not UTF-8 (the message names the file and line), holds no words, or has a word
    (a run without whitespace, punctuation or CJK ideograph) longer than the learner holds in memory
    (the message names the limit)."""


class NotTextError(DataError):
    """A file given as text is not text (formats/plain_text.py): a window of its bytes is mostly NUL
    or control bytes (UTF-16, a binary file), or it runs for megabytes without a line break. The
    message names the file and the byte offset. Raised by every reader of text corpora."""


class VocabularySizeError(MinibertError):
    """The requested vocabulary size cannot be met: it is below what every vocabulary learned from
    the corpus holds (the special tokens, the alphabet and its ``##`` forms); the message names both."""


class PromptFillsMaxLengthError(MinibertError, ValueError):
    """A prompt that the recipe leaves out of the pooling (``include_prompt: false``) takes every
    token ``max_length`` holds, so no token of the text would be left to pool. ``prompt``,
    ``tokens`` (the prompt's, with [CLS]) and ``max_length`` say by how much (docs/embedder.md)."""

    def __init__(self, message: str, prompt: str, tokens: int, max_length: int):
        super().__init__(message)
        self.prompt, self.tokens, self.max_length = prompt, tokens, max_length


class TaskArgumentError(MinibertError, ValueError):
    """A task's argument outside what its model allows (``answer(max_seq_len=500)`` on a model of 128
    positions, ``tag(stride=200)``): ``parameter`` (the Python name), ``value`` and ``allowed`` (what it
    must be, in words that name no other parameter), as data, so that a command says it of its own
    flag (``--max-seq-len must be an int from 4 to 128 ...``) instead of the Python parameter."""

    def __init__(self, parameter: str, value, allowed: str, message: str | None = None):
        super().__init__(message or f"{parameter} must be {allowed}, got {value!r}")  # (the library's own words)
        self.parameter, self.value, self.allowed = parameter, value, allowed


class ExplorerArgumentError(ExplorerInputError, TaskArgumentError):
    """``explore(max_length=...)`` past the model's positions, ``top_k`` past its vocabulary: an
    ``ExplorerInputError`` (the type explore documents) that is a ``TaskArgumentError`` too, with its
    ``parameter``, ``value`` and ``allowed``, so that ``minibert explore`` says it of the flag
    (``--max-length must be ...``) as a usage error (exit 2)."""


class InputFileError(MinibertError):
    """A file a command reads or writes cannot be used: missing, a directory, not UTF-8 text,
    malformed JSON lines, a missing or mistyped field, empty, or an output that would destroy its
    input. The message names the file (and the line). The command exits 1 (2 is for usage errors)."""


class FileWriteError(MinibertError, OSError):
    """A file could not be written: the disk is full, the folder is read-only or not the user's, or
    the path names something that is not a regular file (a directory, a FIFO, a device such as
    /dev/null, a socket), which an atomic write would replace with a file.
    The message names the file (the operating system's own error names none for a full disk);
    ``errno`` is the system's (``errno.ENOSPC``, ``errno.EACCES``, ``errno.EROFS`` ...)."""

    def __str__(self) -> str:
        return str(self.strerror)


class RunFolderBusyError(MinibertError):
    """Another command is writing the run folder (training/run/lock.py): the message names the
    folder and the process id that holds its lock."""


class TrainingDivergedError(MinibertError):
    """Training met a NaN or infinite loss, gradient norm or weight: the run stopped at that step,
    before updating, and its last checkpoint is the last good one (the message names the step, the
    number, the rate, and the command that continues with a lower rate)."""


class ProcessGroupError(MinibertError, RuntimeError):
    """Under torchrun, an operation every process takes part in (the sum of the gradients, a
    barrier) failed: another process of the group stopped or cannot be reached. The message of
    rank 0, which writes the run, names the checkpoint on disk and the command that resumes it."""


class TrainingStateError(MinibertError):
    """A run's training state (``training_state.pt``) is missing, truncated, altered, or belongs to
    other settings, another model config or other data than the ``--resume`` command gives."""


class ModeChangedError(MinibertError, RuntimeError):
    """A model was put in training mode (``.train()``, by a training loop in another thread) while a
    minibert function computed with it in eval mode (pretrained.py's ``evaluating``): its numbers may
    have had dropout, so none is returned. The ``train()`` made meanwhile is kept."""


class ClusterError(MinibertError):
    """A Ray cluster cannot be used (``minibert finetune ... --ray``): the ray extra is not installed
    (the message gives the pip command), or nothing answers at the address given (the message names it)."""


class QuantizationError(MinibertError):
    """``dtype="int8"`` cannot be used as asked: the CPU or torch build has no int8 engine, the model
    is not on the CPU, its int8 outputs fall below the cosine floor to float32 (the message gives the
    measured figure), a backward pass (training) reached an int8 layer, an int8 layer was traced,
    exported or compiled (its activations' scale is computed per call), a model loaded in int8 was
    cast or moved after loading (``.half()``, ``.to("meta")``), or its checkpoint file changed since it
    was loaded (its float32 weights cannot be read again). See docs/int8.md."""
