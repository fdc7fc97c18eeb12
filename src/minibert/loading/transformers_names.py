"""transformers' module names, answered with minibert's.

Tutorials that hook into BERT reach into transformers' module tree: ``model.encoder.layer[3]``,
``model.embeddings.LayerNorm``, ``layer.attention.self.query``. minibert names the same modules
after what they do: ``model.layers[3]``, ``model.embeddings.layer_norm``, ``layer.attention.query``.
Asked for a transformers name, a minibert module raises ``TransformersNameError`` (an
``AttributeError``) that gives minibert's name for every weight under it:

    >>> model.encoder.layer[3]                                             # doctest: +SKIP
    TransformersNameError: 'BertModel' object has no attribute 'encoder', which is transformers' name:
    transformers' encoder.layer[n] is minibert's layers[n] (.layers[3] for .encoder.layer[3]) ...

The names come from the rename table (``loading.names.RENAMES``, the one the loader uses), read when an
error is raised; what this module adds is only where each class sits in the tree (``WHERE``).
"""

from __future__ import annotations

from ..errors import TransformersNameError

# Where each minibert class sits in BertModel's tree ({n} = a layer's number). Classes not named
# here are roots: BertModel, and the classes with heads (whose encoder is .bert).
WHERE = {
    "Embeddings": "embeddings.",
    "EncoderLayer": "layers.{n}.",
    "SelfAttention": "layers.{n}.attention.",
    "FeedForward": "layers.{n}.feed_forward.",
}


# transformers' model methods minibert does not have, and what to do instead (docs/migrating.md's Mistakes).
NOT_IMPLEMENTED = {
    "gradient_checkpointing_enable": "minibert does not implement gradient checkpointing (recomputing each layer's "
    "activations in the backward pass to save memory); to fit in memory, train on smaller batches and "
    "accumulate their gradients (several loss.backward() before each optimizer.step())",
}
NOT_IMPLEMENTED["activation_checkpointing_enable"] = NOT_IMPLEMENTED["gradient_checkpointing_enable"]


class TransformersNames:
    """Mixin for minibert's modules (before ``nn.Module`` in the bases): a missing attribute that is
    a transformers name raises ``TransformersNameError`` naming minibert's; any other stays a plain
    AttributeError. Python looks here only after its usual lookup misses, which for a submodule is
    every time (nn.Module keeps them in ``_modules``): they are found first, with no extra call, so
    the model's forward is no slower than with nn.Module's own lookup."""

    def __getattr__(self, name: str):
        modules = self.__dict__.get("_modules")
        if modules is not None and name in modules:
            return modules[name]
        try:
            return super().__getattr__(name)
        except AttributeError as error:
            message = renamed_message(self, name, str(error))
            if message is None:
                raise
            raise TransformersNameError(message) from None


def renamed_message(module, name: str, error: str) -> str | None:
    """The error for ``module.<name>`` when ``name`` is transformers' name for something ``module``
    holds under another name; None when it is not."""
    if name.startswith("_"):  # private probes (getattr(model, "_warned", False)) stay fast
        return None
    if name in NOT_IMPLEMENTED and hasattr(module, "config"):  # a whole model, not one of its modules
        return f"{error}: {NOT_IMPLEMENTED[name]}"
    pairs = renames_under(module, name)
    if not pairs:
        return None
    theirs = _common_prefix([hub for hub, _ in pairs])
    ours = _common_prefix([mine for _, mine in pairs])
    if ours:
        summary = f"transformers' {_show(theirs)} is minibert's {_show(ours)}"
        if "{n}" in theirs:
            summary += f" (.{_show(ours, 3)} for .{_show(theirs, 3)})"
    else:
        summary = "minibert names what is under it differently"
    lines = [f"{error}, which is transformers' name: {summary}"]
    if len(pairs) > 1 or not ours:
        lines.append("  transformers → minibert:")
        lines += [f"    {_show(hub)} → {_show(mine)}" for hub, mine in pairs]
    lines.append("  (the rename table: minibert.loading.names.RENAMES, shown in docs/checkpoints.md)")
    return "\n".join(lines)


def renames_under(module, name: str) -> list[tuple[str, str]]:
    """(transformers' path, minibert's path) of each rename-table row under ``module.<name>``, both
    relative to ``module``, for the rows ``module`` really holds."""
    from .names import RENAMES  # read when an error is raised: importing minibert stays light

    ours_at = WHERE.get(type(module).__name__, "")
    rows = [(hub.rstrip("."), mine.rstrip(".")) for hub, _, mine in RENAMES if mine.startswith(ours_at)]
    theirs_at = "" if not ours_at else _common_prefix([_parent(hub) for hub, _ in rows]) + "."
    pairs = []
    for hub, mine in rows:
        hub, mine = hub.removeprefix(theirs_at), mine.removeprefix(ours_at)
        if hub.split(".")[0] == name and _holds(module, mine.replace("{n}", "0")):
            pairs.append((hub, mine))
    return pairs


def _holds(module, path: str) -> bool:
    """Whether ``module`` has the submodule or parameter at the dotted ``path`` (no __getattr__)."""
    for part in path.split("."):
        children = {**module._modules, **module._parameters}
        if part not in children:
            return False
        module = children[part]
    return True


def _parent(path: str) -> str:
    return path.rpartition(".")[0]


def _common_prefix(paths: list[str]) -> str:
    """The longest run of leading dot-separated parts that all ``paths`` share."""
    parts = [path.split(".") for path in paths]
    common = []
    for column in zip(*parts):
        if len(set(column)) != 1:
            break
        common.append(column[0])
    return ".".join(common)


def _show(path: str, layer: int | str = "n") -> str:
    """``encoder.layer.{n}.attention`` → ``encoder.layer[n].attention`` (or ``[3]``), as one indexes it in Python."""
    return path.replace(".{n}", f"[{layer}]")
