"""Cuvil's Python exceptions."""


class CompileError(Exception):
    """A model cannot be compiled: an unsupported op or construct, named with its Python source line."""
