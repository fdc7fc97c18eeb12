"""Loading a BERT checkpoint, in one place: find its files, read its tensors, rename them onto
minibert's modules, check every name and shape, and load them — or say exactly what does not fit.

A checkpoint is a ``config.json`` (the shape of the network) and one file of weights. BERT's
weights come in three dialects of the same tensors:

* the hub's PyTorch/safetensors files (``bert.encoder.layer.3.attention.output.LayerNorm.gamma``,
  or without ``bert.`` and with ``weight``/``bias`` in newer exports);
* Google's TensorFlow checkpoints, the zips BERT was released as
  (``bert/encoder/layer_3/attention/output/LayerNorm/gamma``, kernels stored (in, out));
* minibert's own names, after what each module does (``layers.3.attention_norm.weight``).

One table, ``names.RENAMES``, holds all three columns; loading reads it forwards and saving
backwards, so a name is never spelled in two places. Loading is strict: every tensor the model
has must come from the file with its shape, and nothing the file holds may go unexplained; when
something does not fit, one ``CheckpointError`` lists every problem at once (missing, unexpected,
mis-shaped tensors, under the checkpoint's own names), not the first one found:

    >>> from minibert import BertModel                                     # doctest: +SKIP
    >>> BertModel.from_pretrained("google-bert/bert-base-uncased")         # doctest: +SKIP

Read the modules in this order:

    names.py             THE rename table (hub, TensorFlow, minibert names) and its two directions
    hub.py               a name → a file: a local directory, the bundled toy, or the hub (its cache, offline mode)
    hub_commit.py        one load, one commit: a push in the middle of a load changes none of its files
    checkpoint_files.py  which files a checkpoint is, and their tensors by the file's own names (.bin read here)
    safetensors.py       the safetensors format, read by hand, every offset checked before a byte is trusted
    file_pages.py        a weights file mapped, not copied: pages given back once used, so each weight is held once
    tf_checkpoint.py     Google's TensorFlow tensor bundles, read by hand (the CRC32C and protobuf of formats/)
    strict.py            the strict loader: renamed onto the model, every problem listed in one error
    head_labels.py       a checkpoint's classifier: its number of labels when config.json names none
    from_pretrained.py   load_pretrained: from_pretrained's steps, top-down
    config_keywords.py   config fields given to from_pretrained (hidden_dropout_prob=...), or a config given whole
    config_files.py      BertConfig.from_pretrained / AutoConfig's (the fields given), config.save_pretrained
    save_pretrained.py   the model written back under the hub's names

Nothing is imported here: ``import minibert`` stays light, and each module is imported where it is used.
"""
