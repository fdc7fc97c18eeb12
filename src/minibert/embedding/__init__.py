"""Sentence and word vectors from BERT: the ``Embedder`` (embedder.py) and its stages (windows.py,
hidden_states.py, pooling.py, word_vectors.py), its options as one value (options.py), the
sentence-transformers recipe a model folder describes (recipe.py), batches run side by side
(batches.py, streams.py) and a long list a chunk at a time (chunks.py).
``from minibert import Embedder, EmbedOptions``."""
