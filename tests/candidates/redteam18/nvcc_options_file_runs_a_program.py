"""WRONG (the builder ran a program of the candidate's): nvcc reads more options from a file
(`--options-file FILE`, `-optf FILE`), nvcc's own response file, which the deny list did not name (it refuses
gcc's `@file`). The file is the candidate's own CUDA source: with `no_implicit_headers` torch writes `cuda.cu`
as the candidate gave it, here one line, `-Xcompiler=-wrapper,/usr/bin/echo`, the option red team 8 had refused
on the command line; nvcc hands `-wrapper /usr/bin/echo` to its host compiler, which runs echo in place of cc1plus.

(1) Attack: every check of the flags (host/builds.py::normalise_flags) reads the command line only; an options
    file brings any option past it (`-ccbin`, `-Xcompiler -wrapper`, `-o`, ...). With a program running in the
    builder its build directory (the one whose main.o the host keeps as a binding object for later builds of the
    same declarations) is the candidate's to write.
(2) TRUE verdict: compile_error "the flag '--options-file' is not allowed", before anything is built.
(3) GOT before the fix: compile_error from the build itself, its log holding echo's output (the cc1plus command
    line, `/usr/lib/gcc/x86_64-linux-gnu/12/cc1plus -E -quiet ...`): the builder ran the program the candidate
    named (2026-12-03); after: `the flag '--options-file' is not allowed`, nothing built.
    Command: python3 -m kevin_tui eval kernelbench:level1/19 tests/candidates/redteam18/nvcc_options_file_runs_a_program.py
    --device cpu --json --no-git --no-profile --shapes off --no-timing
(4) Weakness: a deny list of options misses every way a tool reads options from elsewhere. `-optf` and
    `--options-file` are refused now, also as another option's value.
"""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

ext = load_inline(
    name="rt18_options_file",
    cpp_sources="int rt18_unused() { return 0; }",
    cuda_sources="-Xcompiler=-wrapper,/usr/bin/echo",
    extra_cuda_cflags=["--options-file", "cuda.cu"],
    no_implicit_headers=True,
)


class ModelNew(nn.Module):
    def forward(self, x):
        return x.clamp_min(0)
