"""Index-box geometry of the distributed mesh (pure functions, no MPI).

Boxes are half-open ``((lo_x, lo_y, lo_z), (hi_x, hi_y, hi_z))`` in global mesh
indices. Ranks are laid out x-fastest in processor grids.
"""

from .._core import geometry as _g

intersect = _g.intersect
volume = _g.volume
split_range = _g.split_range
grid_surface = _g.grid_surface
processor_grid_3d = _g.processor_grid_3d
processor_grid_2d = _g.processor_grid_2d
brick_box = _g.brick_box
brick_boxes = _g.brick_boxes
pencil_box = _g.pencil_box
pencil_boxes = _g.pencil_boxes
tiles_exactly = _g.tiles_exactly

__all__ = [
    "intersect", "volume", "split_range", "grid_surface", "processor_grid_3d",
    "processor_grid_2d", "brick_box", "brick_boxes", "pencil_box", "pencil_boxes",
    "tiles_exactly",
]
