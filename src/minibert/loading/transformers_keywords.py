"""transformers' ``from_pretrained`` keywords that minibert spells otherwise, or needs not.

Code written for transformers passes keywords a minibert loader has under another name, or has
no use for: ``torch_dtype=torch.float16``, ``local_files_only=True``, ``use_fast=True``. Each is
taken here, once, into what minibert means by it; a value minibert cannot honour is refused with
the reason, never dropped:

    keyword                              in minibert
    torch_dtype                          dtype (transformers' older name for it)
    device_map="cpu" / 0 / {"": 0}       device: one device (a map that splits the model is refused)
    device_map="auto"                    device="auto"
    device_map="balanced", "sequential", device="auto" where torch sees one GPU or none (transformers puts the
      "balanced_low_0"                   whole model there too); refused where it sees several (its own plan)
    device_map={"embeddings": "cpu", ...}  device: the one device every module is mapped to (several: refused)
    device_map=None                      no map (transformers' default): as if left out
    cache_dir, local_files_only, token,  the hub download (hub.py's HubOptions); a token is checked
    force_download                       before any request, and never quoted
    subfolder="enc"                      refused: minibert loads a repository's top level or a folder on
                                         disk (download the repository, pass path/enc); "" or None: as if left out
    attn_implementation="eager"/"sdpa"   nothing to do: minibert's attention gives the same numbers
    low_cpu_mem_usage                    nothing to do: the model is built on the meta device and
                                         the file mapped, always
    trust_remote_code                    nothing to do: minibert runs no code from a checkpoint
    use_fast (tokenizers)                nothing to do: minibert's one tokenizer gives the ids of both
    ignore_mismatched_sizes=False        nothing to do: a head of another shape is refused, as transformers'
                                         False refuses it (True, a fresh head in its place, is refused)
    from_tf, from_flax                   nothing to do: transformers 5 drops them too (its example scripts
                                         still pass from_tf=bool(".ckpt" in path)); a TensorFlow 1
                                         checkpoint folder loads without a keyword
    use_safetensors=True / None          True: the checkpoint's weights must be model.safetensors (a folder
                                         of pytorch_model.bin alone is refused, as transformers refuses it);
                                         False (read the .bin beside a .safetensors) is refused
    variant=None, proxies=None           nothing to do; a variant's files (model.fp16.safetensors) and
                                         proxies (huggingface_hub reads HTTPS_PROXY) are refused, saying so

>>> options = {"torch_dtype": "float16", "local_files_only": True, "num_labels": 2}
>>> model_keywords(options, dtype=None, device=None)
('float16', None, HubOptions(cache_dir=None, local_files_only=True, force_download=False))
>>> options   # what is left is minibert's own (the config fields a classifier replaces)
{'num_labels': 2}
"""

from __future__ import annotations

import os

from .hub import HubOptions

# transformers' download keywords, which every from_pretrained takes (hub.py's HubOptions).
HUB_KEYWORDS = ("cache_dir", "local_files_only", "token", "force_download")
# What a model's from_pretrained takes of transformers' (add_pooling_layer: from_pretrained.py, BertModel's only).
TRANSFORMERS_KEYWORDS = ("torch_dtype", "device_map", *HUB_KEYWORDS, "attn_implementation", "low_cpu_mem_usage",
                         "trust_remote_code", "ignore_mismatched_sizes", "add_pooling_layer", "from_tf", "from_flax",
                         "use_safetensors", "variant", "proxies")  # fmt: skip
_ATTENTION = ("eager", "sdpa")  # transformers' two that compute BERT's attention on every device
_NOTHING_TO_DO = ("low_cpu_mem_usage", "trust_remote_code", "from_tf", "from_flax")
# transformers' placement strategies besides "auto": on one GPU (or none) each is "auto"'s placement (_strategy)
STRATEGIES = ("balanced", "balanced_low_0", "sequential")


def hub_keywords(keywords: dict, cache_name: str = "cache_dir") -> HubOptions:
    """Take ``cache_dir`` (``cache_name``: sentence-transformers' is ``cache_folder``),
    ``local_files_only``, ``token`` and ``force_download`` out of ``keywords``, checked."""
    cache_dir = keywords.pop(cache_name, None)
    local_files_only = keywords.pop("local_files_only", False)
    token = keywords.pop("token", None)
    force_download = keywords.pop("force_download", False)
    _refuse_a_subfolder(keywords.pop("subfolder", None))
    if cache_dir is not None and not isinstance(cache_dir, (str, bytes)) and not hasattr(cache_dir, "__fspath__"):
        raise TypeError(f"{cache_name} must be a path, got {type(cache_dir).__name__}")
    for name, flag in (("local_files_only", local_files_only), ("force_download", force_download)):
        if not isinstance(flag, bool):
            raise TypeError(f"{name} must be True or False, got {flag!r}")
    if force_download and local_files_only:
        raise ValueError("force_download=True downloads every file again and local_files_only=True downloads none: "
                         "pass one of them")  # fmt: skip
    check_token(token)
    return HubOptions(None if cache_dir is None else os.fsdecode(cache_dir), local_files_only, token, force_download)


def _refuse_a_subfolder(subfolder) -> None:
    """transformers' ``subfolder=`` (a checkpoint in a folder inside a repository), refused by name and
    before any request: minibert reads a repository's top level. "" and None, transformers' default,
    ask for the top level: nothing to do."""
    if subfolder is None or subfolder == "":
        return
    raise TypeError(f"subfolder={subfolder!r} (transformers' keyword for a checkpoint in a folder inside a repository) "
                    "is not minibert's: it loads a repository's top level, or a folder on disk. Download the "
                    "repository (`hf download org/name --local-dir path`) and pass the folder's path: "
                    f"from_pretrained('path/{subfolder}') (docs/migrating.md)")  # fmt: skip


def check_token(token) -> None:
    """``token`` as huggingface_hub can send it, checked before any request: None (HF_TOKEN or the
    saved login, if any), False (none), True (the saved login, which must exist), or a str that an
    HTTP header can carry (not empty; ASCII, with no whitespace or control character: a token read
    from a file with its newline). The token's value is never put in the message."""
    if token is None or token is False:
        return
    if token is True:
        from huggingface_hub import get_token

        if get_token() is None:
            raise ValueError("token=True sends the saved login, and none is saved: run `hf auth login`, set "
                             "HF_TOKEN, or pass the token itself (token='hf_...')")  # fmt: skip
        return
    if not isinstance(token, str):
        raise TypeError(f"token must be a str (or True: the saved login), got {type(token).__name__}")
    if not token:
        raise ValueError("token='' is empty: pass a token, or leave token out (HF_TOKEN or the saved login is then "
                         "sent, if any), or token=False to send none")  # fmt: skip
    bad = next((char for char in token if char.isspace() or not char.isprintable() or not char.isascii()), None)
    if bad is not None:
        where = "ends with" if token[-1] == bad else "holds"
        raise ValueError(f"token {where} {bad!r}, which no HTTP header can carry (a token read from a file keeps its "
                         "newline: .strip() it); the token itself is not shown")  # fmt: skip


def _nothing_to_do(keywords: dict, names: tuple[str, ...]) -> None:
    """Take out the keywords that change nothing in minibert (each must still be a bool)."""
    for name in names:
        value = keywords.pop(name, None)
        if value is not None and not isinstance(value, bool):
            raise TypeError(f"{name} must be True or False, got {value!r}")


def model_keywords(keywords: dict, *, dtype, device) -> tuple:
    """(dtype, device, HubOptions), transformers' keywords taken out of ``keywords``."""
    if "torch_dtype" in keywords:
        torch_dtype = keywords.pop("torch_dtype")
        if dtype is not None and dtype != torch_dtype:
            raise TypeError(f"dtype={dtype!r} and torch_dtype={torch_dtype!r} disagree: pass dtype= alone")
        dtype = torch_dtype
    device_map = keywords.pop("device_map", None)  # None: no map, transformers' default (code passes it on)
    if device_map is not None:
        device = _one_device(device_map, device)
    attention = keywords.pop("attn_implementation", None)
    if attention is not None and attention not in _ATTENTION:
        raise ValueError(f"attn_implementation={attention!r} is not minibert's: its attention (the book's, or its "
                         f"fast path) computes what {' and '.join(_ATTENTION)} compute; leave it out")  # fmt: skip
    _nothing_to_do(keywords, _NOTHING_TO_DO)
    _refuse_other_files(keywords)
    if keywords.pop("ignore_mismatched_sizes", False) is not False:  # run_glue.py passes its flag, False by default
        raise ValueError("ignore_mismatched_sizes=True (a fresh head where the checkpoint's has another shape) is not "
                         "minibert's: it loads a head only of the checkpoint's shape. To start a head of another "
                         "size, save the encoder alone, BertModel.from_pretrained(path).save_pretrained(folder), "
                         "and load that with the labels: from_pretrained(folder, num_labels=N)")  # fmt: skip
    return dtype, device, hub_keywords(keywords)


def _refuse_other_files(keywords: dict) -> None:
    """transformers' ``variant=`` and ``proxies=``, left out or None (what its scripts pass): nothing
    to do; a value is refused, saying what to do instead. ``use_safetensors`` is left in ``keywords``
    for the load to check against the file it finds (``check_weights_format``)."""
    variant, proxies = keywords.pop("variant", None), keywords.pop("proxies", None)
    if variant is not None:
        raise ValueError(f"variant={variant!r} (transformers' weights files model.{variant}.safetensors) is not "
                         "minibert's: it reads model.safetensors or pytorch_model.bin; download the repository and "
                         f"pass a folder where that variant's file is named model.safetensors")  # fmt: skip
    if proxies is not None:
        raise ValueError("proxies= is not minibert's: huggingface_hub reads the proxy from the environment; set "
                         "HTTPS_PROXY (and HTTP_PROXY) instead")  # fmt: skip
    use_safetensors = keywords.get("use_safetensors")
    if use_safetensors is False:
        raise ValueError("use_safetensors=False (read pytorch_model.bin where model.safetensors is there too) is not "
                         "minibert's: it reads model.safetensors where there is one; leave it out, or pass a "
                         "folder holding pytorch_model.bin alone")  # fmt: skip
    if use_safetensors is not None and use_safetensors is not True:
        raise TypeError(f"use_safetensors must be True, False or None, got {use_safetensors!r}")


def check_weights_format(use_safetensors, weights_file) -> None:
    """``use_safetensors=True``: the weights found are model.safetensors (or its shards), as transformers
    requires, or a CheckpointError naming the file found."""
    from ..errors import CheckpointError

    name = os.fspath(weights_file)
    if use_safetensors and not name.endswith((".safetensors", ".safetensors.index.json")):
        raise CheckpointError(f"use_safetensors=True, but the checkpoint's weights are {name}, not model.safetensors "
                              "(leave use_safetensors out to read them)")  # fmt: skip


def _one_device(device_map, device):
    """The one device ``device_map`` names, agreeing with ``device``: a device (``"cuda"``, ``0``), a
    map of modules to one device (``{"": 0}``, ``{"embeddings": "cpu", "encoder": "cpu"}``), or a
    placement strategy (``"auto"``, ``"balanced"``, ...: ``_strategy``).

    >>> _one_device({"": 0}, None), _one_device(-1, "cpu")  # a number as device= takes it: N the GPU, -1 the CPU
    (0, -1)
    >>> _one_device({"embeddings": "cpu", "encoder": "cpu:0"}, None)
    'cpu'
    >>> _one_device({"embeddings": 0, "encoder": 1}, None)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ValueError: device_map={'embeddings': 0, 'encoder': 1} splits a model over devices (cuda:0, cuda:1); ...
    """
    import torch  # here, not at the top: the tokenizer imports this module, and it works without torch

    if isinstance(device_map, dict):
        device_map = _maps_device(device_map)
    elif isinstance(device_map, str) and device_map.strip() in STRATEGIES:
        device_map = _strategy(device_map.strip())
    if not isinstance(device_map, (str, torch.device, int)) or isinstance(device_map, bool):
        raise TypeError(f"device_map must be a device (a name, a torch.device or a number), a map of modules to "
                        f"one device or 'auto', got {type(device_map).__name__}")  # fmt: skip
    if device is not None and _place(device) != _place(device_map):
        raise TypeError(f"device={device!r} and device_map={device_map!r} disagree: pass device= alone")
    return device_map


def _maps_device(device_map: dict):
    """The device a map of modules names (transformers puts each module on its device): all of it on
    one (``{"": 0}``, the whole model; or every module's the same, as ``_place`` compares them), the
    first spelling of it; a map naming several is refused, naming them. A value is a device, never
    a strategy (``{"": "auto"}``: transformers refuses it as a device name)."""
    if not device_map:  # transformers: "requires accelerate", or KeyError ''
        raise ValueError("device_map={} names no device (transformers fails on it too, in accelerate's lookup): "
                         "leave it out or pass None for no map, or {'': 'cuda:0'} for one device")  # fmt: skip
    places: dict = {}
    for value in device_map.values():
        if isinstance(value, str) and value.strip() in ("auto", *STRATEGIES):
            raise ValueError(f"device_map={device_map!r}: a map's values are devices ('cpu', 0, 'cuda:1'), not "
                             f"{value!r}: pass device_map={value!r} itself")  # fmt: skip
        places.setdefault(_place(value), value)
    if len(places) > 1:
        raise ValueError(f"device_map={device_map!r} splits a model over devices ({', '.join(map(str, places))}); "
                         "minibert loads it on one: pass device='cpu', 'cuda', 'cuda:N' or 'auto'")  # fmt: skip
    return next(iter(places.values()))


def _strategy(name: str) -> str:
    """transformers' placement strategies other than "auto" (accelerate's ``infer_auto_device_map``):
    with one GPU, or none, each puts the whole model on it (or the CPU), as ``"auto"`` does, and is
    taken as ``"auto"``; with several each follows a plan of its own over them (balanced splits the
    model), which minibert does not: refused, before a file is read."""
    import torch

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if gpus > 1:
        raise ValueError(f"device_map={name!r} is transformers' placement strategy over the {gpus} GPUs torch sees "
                         "here (balanced: the model split over them; sequential: GPU 0 filled first); minibert "
                         "loads a model on the one device given: pass device='auto' (torch's current GPU) or "
                         "'cuda:N'")  # fmt: skip
    return "auto"


def _place(device):
    """A device as two keywords are compared: "auto" as it is, else the ``torch.device`` it means
    (``0`` and ``"cuda:0"`` agree; devices.py's ``as_torch_device``)."""
    from .devices import as_torch_device, is_auto

    return "auto" if is_auto(device) else as_torch_device(device)


def config_keywords(keywords: dict) -> HubOptions:
    """HubOptions, transformers' config keywords minibert needs not (trust_remote_code) taken out of ``keywords``."""
    _nothing_to_do(keywords, ("trust_remote_code",))
    return hub_keywords(keywords)


def tokenizer_keywords(keywords: dict) -> HubOptions:
    """HubOptions, transformers' tokenizer keywords minibert needs not taken out of ``keywords``."""
    _nothing_to_do(keywords, (*_NOTHING_TO_DO, "use_fast"))
    return hub_keywords(keywords)
