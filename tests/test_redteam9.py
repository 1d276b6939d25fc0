"""Attacks a ninth red team wrote against the evaluator after the eighth's fixes (tests/candidates/redteam9/,
each file's docstring says the attack, its true verdict and what it got before the fix)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
import torch

from kevin_tui.evaluator.worker import tensorfile

# -- a candidate's file that torch refuses is the candidate's, never the reference worker's crash ------------


def _with_header(path: Path, header: object, data: bytes = b"") -> Path:
    raw = json.dumps(header).encode()
    path.write_bytes(tensorfile.MAGIC + struct.pack("<Q", len(raw)) + raw + data)
    return path


@pytest.mark.parametrize("shape", [[0, 2**63], [0, 2**62, 2**62], [0, 2**64]])
def test_a_zero_size_tensor_torch_cannot_make_is_an_unusable_file(tmp_path, shape):
    """output_shape_overflow_blames_the_reference.py: a zero-element tensor passes the size check whatever its
    other dimensions are, but torch.empty raises TypeError/RuntimeError for them. The reader let that out, the
    reference worker crashed, and the host called it `reference_lost` (the evaluator's failure, "evaluate this
    one again") instead of the candidate's unusable output."""
    node = {"t": "list", "items": [{"t": "tensor", "dtype": "float32", "shape": shape, "offset": 0, "nbytes": 0}]}
    with pytest.raises(tensorfile.TensorFileError, match="torch cannot make"):
        tensorfile.read(_with_header(tmp_path / "out.kt", node), with_devices=True)


def test_honest_files_still_read(tmp_path):
    value = [torch.zeros(0, 5), torch.arange(6, dtype=torch.float32).reshape(2, 3), (1.5, "x", None)]
    tensorfile.write(tmp_path / "ok.kt", value)
    back = tensorfile.read(tmp_path / "ok.kt")
    assert back[0].shape == (0, 5) and torch.equal(back[1], value[1]) and back[2] == (1.5, "x", None)
