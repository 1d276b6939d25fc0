"""Honest: what a worker's own code and its libraries may do with sockets and threads (a Unix socket pair,
an IPv4 and an IPv6 socket, a thread pool) before computing ReLU; the filter must still let it."""

import socket
from concurrent.futures import ThreadPoolExecutor

import torch
import torch.nn as nn

left, right = socket.socketpair()
left.send(b"x")
assert right.recv(1) == b"x"
for family in (socket.AF_INET, socket.AF_INET6):
    socket.socket(family, socket.SOCK_STREAM).close()
with ThreadPoolExecutor(2) as pool:
    assert list(pool.map(abs, [-1, 2])) == [1, 2]


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
