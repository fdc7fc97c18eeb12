"""``minibert.ray.EmbedBatch``, where users import it from: the adapter lives in apps/ray.py."""

from .apps.ray import EmbedBatch

__all__ = ["EmbedBatch"]
