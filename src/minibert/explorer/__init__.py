"""The explorer: see what BERT computes for one text — every head of every layer, what each head
attends to, every layer's guesses for the masked words, how the hidden states compare — in one
self-contained HTML page that opens offline.

    >>> import minibert
    >>> page = minibert.explore("path/to/checkpoint", "The [MASK] sat on the mat.")  # doctest: +SKIP
    >>> page.save("cat.html")                                                        # doctest: +SKIP

What to show (data.py, statistics.py: one forward pass of minibert's model, numpy arrays) is apart
from how to draw it (payload.py packs the arrays; page.py fills the template in assets/ with them).
``minibert explore`` is the command (apps/explore_command.py). See docs/explore.md.

The package is named ``explorer`` and the function ``explore``: ``minibert.explore`` is the plain
function (exploration.py), and importing a module of this package (which makes Python set
``minibert.explorer``) never replaces it.
"""

from .exploration import Exploration, explore

__all__ = ["Exploration", "explore"]
