"""Sentence and word vectors from BERT: the ``Embedder`` (embedder.py), its options as one value
(options.py), the sentence-transformers recipe a model folder describes (recipe.py), and batches
run side by side (streams.py). ``from minibert import Embedder, EmbedOptions``."""
