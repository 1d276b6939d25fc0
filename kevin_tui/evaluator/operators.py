"""ATen operators that are not compute, shared by the runtime op count (in the candidate's process) and the host's
reading of a built library's imports, so both call the same operators PyTorch compute."""

from __future__ import annotations

# Operators that only allocate, view or copy: not the work a kernel should replace.
NOT_COMPUTE = (
    "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like",
    "view", "reshape", "_reshape_alias", "as_strided", "t", "transpose", "permute", "expand", "contiguous",
    "clone", "copy_", "_to_copy", "to", "detach", "alias", "slice", "select", "unsqueeze", "squeeze",
    "lift_fresh", "resize_", "set_", "fill_", "zero_", "unbind", "split", "chunk", "narrow", "flatten",
    "_unsafe_view", "new_empty", "new_zeros", "new_full", "new_empty_strided", "stride", "size", "item",
    "_local_scalar_dense", "is_same_size", "result_type", "arange",
)  # fmt: skip
