"""Making a BERT: the pre-training data, as Google's ``create_pretraining_data.py`` cuts it.

BERT was pre-trained on pairs of text segments ``[CLS] A [SEP] B [SEP]`` with two tasks: predict
the pieces hidden behind ``[MASK]`` (masked LM) and tell whether B followed A in the document or
was drawn from another one (next-sentence prediction). This room turns raw text (one sentence per
line, a blank line between documents) into those *instances*, the same ones Google's script makes
for the same text, vocabulary, flags and seed:

    vocabulary.py   vocab.txt and the tokenizer set up as Google's FullTokenizer
    documents.py    input files → documents → sentences → piece ids (Google's line rules)
    options.py      InstanceOptions: the script's flags as one checked value
    instances.py    documents → instances: segments A and B, random next, truncation
    masking.py      the masked-LM predictions: 80% [MASK], 10% kept, 10% a random piece
    records.py      instances → padded features → TFRecord files, round-robin over shards

``import minibert`` does not import this room; the ``minibert pretraining-data`` command does.
"""
