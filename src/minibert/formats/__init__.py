"""The generic file formats under the core: TFRecord files, protobuf's wire format, the CRC32C
TensorFlow puts on its blocks, bounded JSON, atomic file writes, the commands' line files and the
plain-text check. Nothing here knows about BERT or about loading a model: a checkpoint's files (the
hub, safetensors, .bin, TensorFlow bundles) are read in loading/, which imports these, never the reverse."""
