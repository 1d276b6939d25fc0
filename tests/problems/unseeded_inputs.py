"""A broken problem: get_inputs draws from os.urandom, which no seed fixes, so two workers never draw alike."""

import os

import torch


class Model(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


def get_inputs() -> list[torch.Tensor]:
    noise = torch.frombuffer(bytearray(os.urandom(4 * 256)), dtype=torch.float32).nan_to_num(0.0, 0.0, 0.0)
    return [noise.clamp(-1e3, 1e3)]


def get_init_inputs() -> list:
    return []
