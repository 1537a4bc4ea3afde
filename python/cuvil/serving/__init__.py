"""Cuvil models on existing model servers: :mod:`cuvil.serving.ray` (a Ray Serve deployment) and
:mod:`cuvil.serving.kserve` (a KServe ``Model`` for KServe's Python ModelServer). Both speak the KServe v2 / Open
Inference Protocol JSON shape (:mod:`cuvil.serving.v2`). Cuvil's own server is the ``cuvil serve`` command.
Importing this package imports neither Ray nor KServe."""
