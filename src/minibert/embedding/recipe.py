"""A sentence-transformers model's own recipe for "the embedding of a text".

A BERT checkpoint gives one vector per token. What one vector per *text* is, each
sentence-transformers model says in files beside the weights, and gets wrong vectors if any is
ignored:

* ``modules.json`` lists the pipeline, in order: the ``Transformer`` (the BERT itself), then a
  ``Pooling`` module, optionally ``Dense`` layers (LaBSE projects 768 → 768 with tanh), and
  optionally ``Normalize`` (unit length). Each module's settings are in its folder.
* ``1_Pooling/config.json``: which pooling, from ``cls`` (the bge family), ``mean`` (MiniLM,
  mpnet), ``max``, ``mean_sqrt_len_tokens`` (the sum divided by √length), ``weightedmean`` (token
  i weighs i + 1), ``lasttoken``; several modes are concatenated in the order listed. Older
  models write one ``pooling_mode_*_tokens`` boolean per mode (concatenated in the order cls, max,
  mean, mean_sqrt_len_tokens, weightedmean, lasttoken). ``include_prompt: false`` leaves the
  prompt's tokens out of the pooling (instructor models).
* ``2_Dense/``: ``config.json`` (in_features, out_features, bias, activation_function as a torch
  class path, use_residual) and the weights (``linear.weight``, ``linear.bias``).
* ``3_Normalize/config.json``: unit length; its ``module_input_name`` and ``module_output_name``
  must be ``sentence_embedding`` (another name normalizes something else, or keeps both vectors).
* ``sentence_bert_config.json``: ``max_seq_length`` (texts are cut there), ``do_lower_case``
  (lowercase the text first, without stripping accents), and in sentence-transformers 6
  ``processing_kwargs`` (its ``max_length`` replaces ``max_seq_length``; folder_settings.py).
* ``config_sentence_transformers.json``: ``prompts`` (e5's ``"query: "`` / ``"passage: "``; every
  model also has ``"query"`` and ``"document"``, empty where the file does not give them, as
  sentence-transformers 6 starts each SentenceTransformer from them: ``DEFAULT_PROMPTS``),
  ``default_prompt_name`` (prepended when no prompt is given), ``similarity_fn_name``, and
  ``truncate_dim`` (a Matryoshka model's vectors are cut to their first ``truncate_dim`` values,
  after the Normalize module: they are no longer of unit length).

``read_recipe`` reads all of it into a ``SentenceRecipe``; ``Embedder`` follows it unless told
otherwise. A module or setting minibert does not compute is a CheckpointError, never skipped.
Without ``modules.json`` none of these files is read (sentence-transformers builds its default
Transformer and mean pooling there): the folder is a plain BERT.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from ..errors import CheckpointError
from ..formats.json_files import read_json
from ..loading.hub import resolve_file
from ..loading.strict import WEIGHT_DTYPE_NAMES, WEIGHT_DTYPES
from .folder_settings import choose_prompt, read_prompts, read_sequence_length, read_task_lengths, torch_class_path
from .options import POOLING_MODES, check_truncate_dim

_LEGACY_POOLING_KEYS = {
    "pooling_mode_cls_token": "cls",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens": "weightedmean",
    "pooling_mode_lasttoken": "lasttoken",
}
# Dense activations (torch class paths as sentence-transformers saves them) minibert computes.
DENSE_ACTIVATIONS = {
    "torch.nn.modules.activation.Tanh": torch.tanh,
    "torch.nn.modules.linear.Identity": lambda x: x,
    "torch.nn.modules.activation.ReLU": F.relu,
    "torch.nn.modules.activation.GELU": F.gelu,
    "torch.nn.modules.activation.Sigmoid": torch.sigmoid,
    "torch.nn.modules.activation.SiLU": F.silu,
}
SIMILARITY_FUNCTIONS = ("cosine", "dot", "euclidean", "manhattan")
# The prompts every SentenceTransformer has (sentence-transformers 6's ``_default_prompts``, made
# empty strings where a folder gives none): so encode_query's prompt_name="query" works on any model.
DEFAULT_PROMPTS = {"query": "", "document": ""}
# modules.json types, by the last part of their class path (sentence_transformers.models.Pooling,
# sentence_transformers.sentence_transformer.modules.pooling.Pooling, ...).
_KNOWN_MODULES = ("Transformer", "Pooling", "Dense", "Normalize")


@dataclass
class DenseLayer:
    """out = activation(x · weightᵀ + bias) [+ x, or + x · residualᵀ when use_residual]."""

    weight: torch.Tensor  # (out_features, in_features)
    bias: torch.Tensor | None  # (out_features,)
    activation: str  # a key of DENSE_ACTIVATIONS
    residual: torch.Tensor | None = None  # (out, in) projection, or an identity marker below
    use_residual: bool = False

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        out = DENSE_ACTIVATIONS[self.activation](F.linear(x, self.weight, self.bias))
        if self.use_residual:
            out = out + (x if self.residual is None else F.linear(x, self.residual))
        return out


@dataclass
class SentenceRecipe:
    """What a sentence-transformers model does between BERT's token vectors and its embedding."""

    pooling: tuple[str, ...] = ("mean",)
    include_prompt: bool = True
    dense: list[DenseLayer] = field(default_factory=list)
    normalize: bool = False
    max_seq_length: int | None = None
    do_lower_case: bool = False
    prompts: dict[str, str] = field(default_factory=dict)  # over DEFAULT_PROMPTS (__post_init__)
    default_prompt_name: str | None = None
    similarity_fn_name: str = "cosine"
    truncate_dim: int | None = None  # the vectors' first values kept (Matryoshka models); None: all
    task_lengths: dict[str, int] = field(default_factory=dict)  # encode_query's / encode_document's length, if any

    def __post_init__(self):
        self.prompts = {**DEFAULT_PROMPTS, **self.prompts}  # as SentenceTransformer(prompts=...) merges them

    def dimension(self, hidden_size: int) -> int:
        """The width of the pipeline's vectors, before ``truncate_dim`` cuts them."""
        return self.dense[-1].weight.shape[0] if self.dense else len(self.pooling) * hidden_size

    def prompt_for(self, prompt: str | None, prompt_name: str | None) -> str:
        """The text to prepend, as sentence-transformers chooses it: ``prompt`` as given, else the
        one named ``prompt_name``, else the model's default prompt, else none."""
        return choose_prompt(self.prompts, self.default_prompt_name, prompt, prompt_name)


_NOT_READ = object()  # read_recipe's ``modules`` when the caller has not read modules.json


def read_recipe(name_or_path, revision=None, *, hidden_size: int, modules=_NOT_READ) -> SentenceRecipe | None:
    """The recipe of a sentence-transformers model, or None if ``name_or_path`` is not one (no
    modules.json: a plain BERT, mean pooled over the tokenizer's length, whatever else lies beside it,
    as sentence-transformers builds its default modules there and reads none of its own files).
    Every file is checked; anything minibert does not implement is a CheckpointError. ``modules``:
    what ``read_modules`` gave, when the caller asked it already (``load_parts`` does, first)."""
    read = read_modules(name_or_path, revision) if modules is _NOT_READ else modules
    if read is None:
        return None
    modules_file, modules, kinds = read
    recipe = _plain_recipe(name_or_path, revision) or SentenceRecipe()
    seen_pooling = False
    for position, (module, kind) in enumerate(zip(modules[1:], kinds[1:]), start=1):
        folder = module.get("path", "")
        if kind == "Pooling":
            if seen_pooling or position != 1:
                raise CheckpointError(f"{modules_file}: a Pooling module must come once, right after the Transformer")
            seen_pooling = True
            _read_pooling(recipe, name_or_path, revision, folder, hidden_size)
        elif not seen_pooling:
            raise CheckpointError(f"{modules_file}: {kind} before any Pooling module is not implemented")
        elif kind == "Dense":
            if recipe.normalize:
                raise CheckpointError(f"{modules_file}: a Dense module after Normalize is not implemented")
            width = recipe.dimension(hidden_size)
            recipe.dense.append(_read_dense(name_or_path, revision, folder, width))
        else:  # Normalize
            _read_normalize(name_or_path, revision, folder)
            recipe.normalize = True
    if not seen_pooling:
        raise CheckpointError(f"{modules_file}: no Pooling module: the model gives token vectors, not sentence vectors")
    _read_model_config(recipe, name_or_path, revision)
    return recipe


def read_modules(name_or_path, revision=None) -> tuple[os.PathLike, list[dict], list[str]] | None:
    """(modules.json, its modules, their kinds: "Transformer", "Pooling", ...), or None without one;
    a module minibert does not compute, or a pipeline whose BERT is not at the root, is a
    CheckpointError naming the file. ``load_parts`` asks this first, before the tokenizer and the model
    are looked for at the root: an older sentence-transformers folder keeps them in ``0_Transformer/``,
    and "no vocab.txt" would hide why minibert does not load it."""
    modules_file = resolve_file(name_or_path, "modules.json", revision=revision, required=False)
    if modules_file is None:
        return None
    modules = _read_json(modules_file)
    if not isinstance(modules, list) or not all(isinstance(m, dict) and isinstance(m.get("type"), str)
                                                 for m in modules):  # fmt: skip
        raise CheckpointError(f"malformed {modules_file}: expected a list of {{'type': ..., 'path': ...}}")
    kinds = [module["type"].rsplit(".", 1)[-1] for module in modules]
    for module, kind in zip(modules, kinds):
        if not module["type"].startswith("sentence_transformers.") or kind not in _KNOWN_MODULES:
            raise CheckpointError(
                f"{modules_file}: module {module.get('path') or module['type']!r} of type {module['type']} is "
                f"not implemented by minibert (it computes {', '.join(_KNOWN_MODULES)})"
            )
    if not kinds or kinds[0] != "Transformer" or kinds.count("Transformer") != 1:
        raise CheckpointError(
            f"{modules_file}: minibert loads pipelines that start with the BERT at the repository's root "
            f"(a Transformer module with path ''); this one is {[m['type'] for m in modules]}"
        )
    if modules[0].get("path", ""):
        raise CheckpointError(
            f"{modules_file}: the Transformer module's path is {modules[0]['path']!r} (an older sentence-transformers "
            "layout, with the BERT, its tokenizer and sentence_bert_config.json in that folder); minibert loads "
            "pipelines whose BERT is at the repository's root (path ''): move that folder's files to the root and "
            "set its path to \"\""
        )
    return modules_file, modules, kinds


def _plain_recipe(name_or_path, revision) -> SentenceRecipe | None:
    """sentence_bert_config.json (max_seq_length, do_lower_case), or None without it."""
    path = resolve_file(name_or_path, "sentence_bert_config.json", revision=revision, required=False)
    if path is None:
        return None
    values = _read_json(path)
    if not isinstance(values, dict):
        raise CheckpointError(f"malformed {path}: the top level is not a JSON object")
    task = values.get("transformer_task", "feature-extraction")
    modality = values.get("modality_config")
    text_config = modality.get("text") if isinstance(modality, dict) else None
    output = "last_hidden_state"  # ST6 says which output of the Transformer is pooled
    if isinstance(text_config, dict):
        output = text_config.get("method_output_name", output)
    if task != "feature-extraction" or output != "last_hidden_state":
        raise CheckpointError(
            f"{path}: transformer_task {task!r} with text output {output!r} is not implemented (minibert pools "
            "the last hidden state of feature-extraction models)"
        )
    recipe = SentenceRecipe()
    recipe.max_seq_length, _, _ = read_sequence_length(values, path, pair=False)
    recipe.do_lower_case = _boolean(values, "do_lower_case", False, path)
    recipe.task_lengths = read_task_lengths(values, path)
    return recipe


def _read_pooling(recipe: SentenceRecipe, name_or_path, revision, folder: str, hidden_size: int) -> None:
    values, path = _module_config(name_or_path, revision, folder, "Pooling")
    if "pooling_mode" in values:
        modes = values["pooling_mode"]
        modes = [modes] if isinstance(modes, str) else modes
    else:  # older configs: one boolean per mode. sentence-transformers takes any truthy value (1, "false")
        # as on; minibert refuses what is not true or false rather than read a different recipe.
        modes = [mode for key, mode in _LEGACY_POOLING_KEYS.items() if _boolean(values, key, False, path)] or ["mean"]
    if not isinstance(modes, list) or not modes or not all(mode in POOLING_MODES for mode in modes):
        raise CheckpointError(f"{path}: pooling_mode {values.get('pooling_mode')!r} is not one of {POOLING_MODES}")
    width = values.get("embedding_dimension", values.get("word_embedding_dimension", hidden_size))
    if width != hidden_size:
        raise CheckpointError(f"{path}: embedding_dimension {width!r} is not the model's hidden_size {hidden_size}")
    recipe.pooling = tuple(modes)
    recipe.include_prompt = _boolean(values, "include_prompt", True, path)


def _read_dense(name_or_path, revision, folder: str, width: int) -> DenseLayer:
    values, path = _module_config(name_or_path, revision, folder, "Dense")
    in_features, out_features = values.get("in_features"), values.get("out_features")
    if in_features != width or not isinstance(out_features, int) or out_features < 1:
        raise CheckpointError(
            f"{path}: in_features {in_features!r} / out_features {out_features!r} do not follow the previous "
            f"module's output width {width}"
        )
    _check_sentence_embedding_names(values, path)
    given = values.get("activation_function", "torch.nn.modules.activation.Tanh")
    activation = torch_class_path(given)  # torch.nn.Tanh names the class torch.nn.modules.activation.Tanh
    if activation not in DENSE_ACTIVATIONS:
        raise CheckpointError(
            f"{path}: activation_function {given!r:.80} is not implemented; minibert computes the torch classes "
            f"{', '.join(DENSE_ACTIVATIONS)} (or another path of one of them, such as torch.nn.Tanh)"
        )
    has_bias = _boolean(values, "bias", True, path)
    use_residual = _boolean(values, "use_residual", False, path)
    state = _read_dense_weights(name_or_path, revision, folder)
    expected = {"linear.weight": (out_features, in_features)}
    if has_bias:
        expected["linear.bias"] = (out_features,)
    if use_residual and in_features != out_features:
        expected["residual.weight"] = (out_features, in_features)
    problems = [
        f"{name} {tuple(state[name].shape) if name in state else 'missing'} (expected {shape})"
        for name, shape in expected.items()
        if name not in state or tuple(state[name].shape) != shape
    ]
    problems += [f"{name} of dtype {str(state[name].dtype).removeprefix('torch.')} (minibert computes from "
                 f"{WEIGHT_DTYPE_NAMES})" for name in expected
                 if name in state and state[name].dtype not in WEIGHT_DTYPES]  # fmt: skip
    problems += [f"{name} unexpected" for name in state if name not in expected]
    if problems:
        raise CheckpointError(f"the weights in {folder}/ do not match {path}: {'; '.join(problems)}")
    return DenseLayer(
        weight=state["linear.weight"].float(),
        bias=state["linear.bias"].float() if has_bias else None,
        activation=activation,
        residual=state["residual.weight"].float() if "residual.weight" in state else None,
        use_residual=use_residual,
    )


def _read_normalize(name_or_path, revision, folder: str) -> None:
    """A Normalize module normalizes the sentence embedding in place unless its config names another
    input or output: refused then (sentence-transformers 6 saves a config.json; older ones none). Its
    folder may be ``""``, the model's own, as sentence-transformers loads it: a Normalize has no weights,
    and the model's config.json names no module input or output."""
    if folder != "" and not is_a_module_folder(folder):
        raise CheckpointError(f"{name_or_path}: modules.json gives the Normalize module the folder {folder!r}, "
                              "not a folder inside the model's (relative, without ..)")  # fmt: skip
    config = f"{folder}/config.json" if folder else "config.json"
    path = resolve_file(name_or_path, config, revision=revision, required=False)
    if path is not None:
        values = _read_json(path)
        if not isinstance(values, dict):
            raise CheckpointError(f"malformed {path}: the top level is not a JSON object")
        _check_sentence_embedding_names(values, path)


def _check_sentence_embedding_names(values: dict, path) -> None:
    for key in ("module_input_name", "module_output_name"):
        if values.get(key, "sentence_embedding") not in ("sentence_embedding", None):
            raise CheckpointError(f"{path}: {key} = {values[key]!r} is not implemented (only sentence_embedding)")


def is_a_module_folder(folder) -> bool:
    """Whether modules.json's ``path`` names a folder inside the model's (relative, no ``..``).

    >>> is_a_module_folder("1_Pooling"), is_a_module_folder("../elsewhere"), is_a_module_folder("/etc")
    (True, False, False)
    """
    return isinstance(folder, str) and bool(folder) and not folder.startswith("/") and ".." not in folder.split("/")


def _module_config(name_or_path, revision, folder, kind: str) -> tuple[dict, os.PathLike]:
    if not is_a_module_folder(folder):
        raise CheckpointError(f"{name_or_path}: modules.json gives the {kind} module the folder {folder!r}")
    path = resolve_file(name_or_path, f"{folder}/config.json", revision=revision)
    values = _read_json(path)
    if not isinstance(values, dict):
        raise CheckpointError(f"malformed {path}: the top level is not a JSON object")
    return values, path


def _read_dense_weights(name_or_path, revision, folder: str) -> dict:
    from ..loading.checkpoint_files import WEIGHT_FILES, read_state_dict

    for filename in WEIGHT_FILES:
        path = resolve_file(name_or_path, f"{folder}/{filename}", revision=revision, required=False)
        if path is not None:
            return read_state_dict(path)
    raise CheckpointError(f"{name_or_path}: {folder}/ has no {' or '.join(WEIGHT_FILES)}")


def _read_model_config(recipe: SentenceRecipe, name_or_path, revision) -> None:
    path = resolve_file(name_or_path, "config_sentence_transformers.json", revision=revision, required=False)
    if path is None:
        return
    values = _read_json(path)
    if not isinstance(values, dict):
        raise CheckpointError(f"malformed {path}: the top level is not a JSON object")
    recipe.prompts, recipe.default_prompt_name = read_prompts(values, path, DEFAULT_PROMPTS)
    similarity = values.get("similarity_fn_name") or "cosine"
    if not isinstance(similarity, str) or similarity not in SIMILARITY_FUNCTIONS:
        raise CheckpointError(f"{path}: similarity_fn_name {similarity!r} is not one of {SIMILARITY_FUNCTIONS}")
    recipe.similarity_fn_name = similarity
    recipe.truncate_dim = check_truncate_dim(values.get("truncate_dim"), f"{path}: truncate_dim", CheckpointError)


def similarity(a: torch.Tensor, b: torch.Tensor, how: str) -> torch.Tensor:
    """(N, D), (M, D) → (N, M) scores, as sentence-transformers' ``model.similarity`` computes them:
    cosine, dot product, or the negative euclidean / manhattan distance (higher is more similar)."""
    if how == "cosine":
        return F.normalize(a, dim=-1) @ F.normalize(b, dim=-1).T
    if how == "dot":
        return a @ b.T
    if how == "euclidean":
        return -torch.cdist(a, b, p=2.0)
    if how == "manhattan":
        return -torch.cdist(a, b, p=1.0)
    raise ValueError(f"similarity must be one of {SIMILARITY_FUNCTIONS}, got {how!r}")


def _read_json(path: os.PathLike):
    return read_json(path, "JSON in")


def _boolean(values: dict, key: str, default: bool, path) -> bool:
    value = values.get(key, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise CheckpointError(f"{path}: {key} must be true or false, got {value!r}")
    return value
