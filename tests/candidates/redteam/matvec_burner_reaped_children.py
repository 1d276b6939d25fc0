"""ATTACK: slow the reference down with CPU burners whose CPU time the host never sees.

(1) For level1/4 (matrix-vector, ~40 ms a call on one CPU thread, memory-bound): a C++ extension
    whose matrix-vector product is the reference's own at::matmul (true speed: exactly 1x) plus, started from C++ in __init__ (so
    no LeftoverGuard is armed yet, and the Python static checks see no fork/kill), a `/bin/sh`
    "spawner" child that keeps 2 x ncpu loops (each its own session) of short-lived busy subshells
    running. forward() SIGSTOPs those groups on entry and SIGCONTs it on return: the burners eat the
    CPU while the *reference* worker runs its rounds (and while the candidate runs its own control
    calls, so process_bias stays ~1 and the interval is not widened), never during the candidate's
    own timed calls. Each burner lives a few ms and is reaped by its parent shell, so its CPU time
    moves into a parent's cutime, which `kevin_tui/processes.py:cpu_seconds` (utime+stime of the
    processes alive at that instant) never adds up; the spawner itself is a child that existed
    before any LeftoverGuard and uses almost no CPU.
(2) TRUE verdict: `rejected` (the README: "A candidate whose processes use the CPU while the
    reference is being timed is rejected"), or at worst correct at ~1x.
(3) GOT (base 4427b03, CPU, bwrap, --strict, 2 loaded cores, back to back): twin `correct 0.94x
    [0.85-1.05]` (reference 49.6 ms); this attack `correct 1.16x [1.01-1.27]` "1.16x vs eager"
    (reference slowed to 63.2 ms, candidate 54.7 ms as fast as the twin), no warning. The loops are
    `setsid` so each is its own CFS autogroup (inside the candidate's session they would only compete
    with the candidate). No process outlived the evaluation under bwrap. After merging main
    (f720f8d): twin 0.91x [0.74-1.08] (reference 38.8 ms), attack 1.10x [0.96-1.36] (reference
    slowed to 54.8 ms, +41%): the headline speedup is inflated ~1.2x; on 2 loaded cores the
    interval may or may not exclude 1.0.
(4) Weakness: kevin_tui/processes.py cpu_seconds (live processes only, utime+stime, no cutime/cstime,
    no cgroup cpu.stat) used by HostRun.measure's leftover_cpu check
    (host/candidate_run.py, LEFTOVER_CPU_SHARE 25% of the window + LEFTOVER_CPU_FLOOR_S 20 ms free);
    worker/guards.py LeftoverGuard only compares children against those alive when a step began.
"""

import os

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

BURNERS = 2 * (os.cpu_count() or 2)

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
    name="redteam_matvec_burner",
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
