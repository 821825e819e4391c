"""MPI plumbing shared by every collective object (private).

- ``collective``  agreement of errors over a communicator (every rank raises what one rank
                  found), sums on NumPy buffers (no lowercase mpi4py reductions), the
                  object's own communicator;
- ``threads``     one call at a time per object (``Busy``) and the rules for threads;
- ``abort``       an uncaught exception under mpirun calls ``MPI_Abort`` (docs/reliability.md).
"""

#: The communication modes of every exchange (the core's ``CommMode``, cpp/comm/exchange_plan.hpp),
#: written once: ``comm_mode`` of PME (which adds "auto") and of the distributed FFTs, the command
#: line and the benchmarks take them from here.
COMM_MODES = ("pt2pt", "nonblocking", "collective")
