"""Running kernels from Python: ``device`` compiles and launches ``kernel[grid](...)`` on the
GPU, ``arguments`` types launch arguments, ``tensor_maps`` encodes TMA descriptors for it,
``library`` loads libraries built by ``aotk build`` (``aotk.load``)."""
