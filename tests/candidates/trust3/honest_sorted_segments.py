"""Honest (must stay `correct` with --no-near-duplicates, tests/problems/sorted_segments.py): segment
sums that rely on the ids being sorted, as get_inputs() always makes them (lengths from a bincount,
then one segment_reduce). Today: `incorrect` — the timing pool still mixes elements of two samples
into the ids, which are then unsorted, though --no-near-duplicates said the problem allows no such
inputs."""
import torch
import torch.nn as nn

SEGMENTS = 64


class ModelNew(nn.Module):
    def forward(self, values, ids):
        lengths = torch.bincount(ids, minlength=SEGMENTS)
        return torch.segment_reduce(values, "sum", lengths=lengths)
