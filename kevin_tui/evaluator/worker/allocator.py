"""Every worker's C allocator set the same way, at its best, before anything allocates.

glibc hands a large block out as a fresh `mmap` (always above 32 MiB, below it by a threshold that moves
with the process's history) and gives freed memory back to the system, so the next large tensor is faulted
in page by page: in a fresh process a 1 MB ReLU spent most of its time in page faults, and whether it did
depended on what that process had allocated before. Both the timing loop's drawing (each call's fresh inputs)
and a kernel's output allocation pay it. The candidate's process is its own: one `mallopt` in its library
(`tests/candidates/redteam12/allocator_tuned_relu.py`) made its allocations fault-free while the reference's
were not, and a ReLU as fast as the reference's read `correct` at 6.8x (the saving in the loop's drawing is
credited as the reference's loop overhead). Here every worker starts never mapping and never trimming, so a
candidate has nothing better to switch to, and two processes no longer differ by their heaps' histories. The cost
is memory: a worker holds its peak heap for its life, and the heap grows a few blocks past the working set before
freed blocks are reused (posix_memalign asks for a little more than the block freed): in a loop of three 32 MB
calls a round, 830 MB resident against 510 MB, the same from the tenth round on.
"""

from __future__ import annotations

import ctypes

M_TRIM_THRESHOLD, M_MMAP_MAX = -1, -4
NEVER_TRIM = (1 << 31) - 1  # the largest value mallopt takes (an int)


def steady() -> bool:
    """Large blocks from the heap, freed memory kept for reuse; False where the C library is not glibc."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(M_MMAP_MAX, 0)) and bool(mallopt(M_TRIM_THRESHOLD, NEVER_TRIM))
