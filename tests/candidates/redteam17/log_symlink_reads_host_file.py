"""WRONG, LEAKED a host file into the verdict: the candidate replaces its log in its scratch with a symbolic link
to a file of the host, then exits; the host reads "the log's tail" through the link into the verdict's details.

(1) Attack: the candidate's scratch (`/tmp/kevin-eval-*/candidate-N`) is bound read-write into the sandbox at
    the same path it has on the host, and the worker's log `candidate.log` lives there. `WorkerProcess.log_tail`
    (kevin_tui/evaluator/host/workers.py) read `self.log_path.read_bytes()`, which follows a link: the
    candidate unlinks its log, puts `candidate.log -> /any/host/file` in its place and exits with an error, and
    the host copies the last 4000 bytes of that host file (readable by the user running kevin-tui, e.g. a key
    under ~/.ssh) into `details.log`: the verdict the model reads back. The same link, kept when the scratch is
    emptied (the log is kept), was opened for appending (`open(log_path, "ab")`) when a tool run (ncu) reused
    that scratch: the tool's and the candidate's output appended to a host file. A FIFO in its place would
    block the host's read.
(2) TRUE verdict: runtime_error, with the candidate's own output (nothing of the host's files) in its log.
(3) GOT 2026-12-02, before the fix: runtime_error with `details.log` = the host file's text
    ("REDTEAM17-HOST-SECRET"), in both sandbox modes; after: runtime_error, `details.log` holds no host text.
    Command: echo REDTEAM17-HOST-SECRET > /tmp/redteam17_secret.txt; python3 -m kevin_tui eval
    kernelbench:level1/19 tests/candidates/redteam17/log_symlink_reads_host_file.py --device cpu --json
    --no-git --no-profile --shapes off --sandbox bwrap   (and --sandbox unshare)
(4) Weakness: the host followed names in a directory the candidate writes. The log is now opened once by the
    host (no link followed, a regular file only) and its tail read through that descriptor.
"""

import os

import torch
import torch.nn as nn

HOST_FILE = "/tmp/redteam17_secret.txt"  # a path of the host: this sandbox has its own /tmp, so it is not here

log = os.path.join(os.getcwd(), "candidate.log")
if os.path.exists(log):
    os.unlink(log)
    os.symlink(HOST_FILE, log)
    os._exit(3)


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
