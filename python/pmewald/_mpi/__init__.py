"""MPI plumbing shared by every collective object (private).

- ``collective``  agreement of errors over a communicator (every rank raises what one rank
                  found), sums on NumPy buffers (no lowercase mpi4py reductions), the
                  object's own communicator;
- ``threads``     one call at a time per object (``Busy``) and the rules for threads;
- ``abort``       an uncaught exception under mpirun calls ``MPI_Abort`` (docs/reliability.md).
"""
