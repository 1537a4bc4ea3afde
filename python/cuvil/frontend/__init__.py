"""Frontends: turn a framework's model into Cuvil IR through cuvil._C.GraphBuilder."""
