"""Google's pre-training data (``create_pretraining_data.py``), written out: the same instances
Google's script makes for the same text, vocabulary, flags and seed.

    full_tokenizer.py  vocab.txt and the tokenizer set up as Google's FullTokenizer
    documents.py       input files → documents → sentences → piece ids (Google's line rules)
    options.py         InstanceOptions: the script's flags as one checked value
    instances.py       documents → instances: segments A and B, random next, truncation
    masking.py         the masked-LM predictions: 80% [MASK], 10% kept, 10% a random piece
    records.py         instances → padded features → TFRecord files, round-robin over shards
    create.py          create_pretraining_data: the whole script as one function

Training reads these TFRecords (tasks/tfrecord_instances.py, tasks/pretraining.py).
"""
