"""HONEST TWIN of matvec_burner_reaped_children.py (level1/4): the same C++ extension (at::matmul, true speed 1x) and the
same code, with no burner started. Its speedup in the same run is the kernel's true speed."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

BURNERS = 0  # the honest twin: no burners

cpp_source = r"""
#include <unistd.h>
#include <signal.h>
#include <fstream>
#include <string>
#include <vector>

static pid_t spawner = 0;
static std::vector<pid_t> groups;

void start(int64_t burners) {
    if (spawner != 0 || burners <= 0) return;
    // `burners` loops, each in a session (so a scheduler autogroup) of its own; each loop iteration is
    // a fresh subshell that spins a few ms and exits, reaped by its loop (its CPU goes to the loop's
    // cutime, which nobody adds up).
    std::string script = "i=0; while [ $i -lt " + std::to_string(burners) + " ]; do "
        "setsid sh -c 'while :; do ( n=0; while [ $n -lt 3000 ]; do n=$((n+1)); done ); done' & "
        "i=$((i+1)); done; wait";
    pid_t pid = fork();
    if (pid == 0) {
        setsid();
        execl("/bin/sh", "sh", "-c", script.c_str(), (char*)nullptr);
        _exit(127);
    }
    spawner = pid;
}

static void find_groups() {  // the loops are the spawner's children, each its own process group
    if (!groups.empty() || spawner == 0) return;
    std::ifstream children("/proc/" + std::to_string(spawner) + "/task/" + std::to_string(spawner) + "/children");
    for (pid_t p; children >> p;) groups.push_back(p);
}

static void pause_burners(int sig) {
    find_groups();
    for (pid_t g : groups) killpg(g, sig);
}

torch::Tensor matvec(torch::Tensor A, torch::Tensor B) {
    pause_burners(SIGSTOP);
    auto out = at::matmul(A, B);  // the same library call as the reference: true speed 1x
    pause_burners(SIGCONT);
    return out;
}
"""

ext = load_inline(
    name="redteam_matvec_twin",
    cpp_sources=cpp_source,
    functions=["start", "matvec"],
    extra_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        ext.start(BURNERS)

    def forward(self, A, B):
        return ext.matvec(A.contiguous(), B.contiguous())
