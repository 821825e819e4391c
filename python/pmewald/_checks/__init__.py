"""Checks made before any work (private): argument validation (``validate``: arrays, boxes,
atoms and exclusions) and the per-rank size limits of the mesh (``limits``: 32-bit element
counts and the memory each rank has), every one agreed over the communicator by the caller.
"""
