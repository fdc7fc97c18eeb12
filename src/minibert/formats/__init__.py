"""The file formats under the core: safetensors, torch's .bin, Google's TensorFlow tensor bundles
(with the CRC32C they need), the Hugging Face hub and its cache, and atomic file writes. Nothing
here knows about BERT's layers; weights.py maps these files' names onto the model."""
