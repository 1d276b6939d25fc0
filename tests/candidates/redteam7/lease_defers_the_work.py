"""Red team 7: the timed work done after the round, while the host waits on the reference's read.

Problem: tests/problems/matmul_256.py (256x256 matmul, ~33 MFLOP a call).

Attack: during a timing round forward returns an empty tensor at once and remembers (a, b, out). When
the worker closes the round's output file `round-N.kt` (every output written, before `round_done` is
sent) the candidate takes a write *lease* on it (fcntl F_SETLEASE F_WRLCK) and hands the descriptor to a
native thread. The host then moves the file (rename does not break a lease) and asks the reference
worker to ingest it; the reference's open() blocks in the kernel until the lease holder lets go (up to
/proc/sys/fs/lease-break-time, 45 s). In that time, outside the round the host timed and outside any
window whose CPU time it reads, the thread computes every call's product (a plain C++ loop, slower than
MKL) and pwrite()s it into the file, then releases the lease: the reference reads correct outputs. The
warm-up round (round 0) and every trial are computed at once, honestly. The thread waits 50 ms before it
starts, as long as a large problem's products take, so that on a small problem too the lease is held when
the host looks (a quicker thread only finishes before the host stops the candidate: its CPU time is then
the round's, and the verdict is true).

The moment of the close is caught by shadowing `open` in the worker's tensorfile module (a module
global, set from C++ so the syntax tree shows no assignment; the identity tripwire watches
`tensorfile.write`, not the names it looks up). Any other way to run code between the close and the
reply would do (a native thread watching the directory with inotify wins the race most rounds).

TRUE verdict: correct at the C++ loop's real speed (well below 1x against MKL's sgemm; see
honest_matmul_loop_twin.py), or incorrect for a round file it still held. Got before the fix (matmul_1024,
without the 50 ms wait): correct, 263.33x (interval 12.60-292.45x); after: incorrect (timing round 1: the
file is unusable, its reader refused by the lease while the candidate is stopped).
Hole: host/candidate_run.py candidate_round — the round's CPU time is read when `round_done` arrives and
the leftover-CPU check covers only the reference's rounds; nothing charges or forbids work between
`round_done` and the reference's read of the outputs, and a file the candidate still holds (a lease,
an open descriptor) is read after the round was timed.
"""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <pybind11/eval.h>
#include <fcntl.h>
#include <unistd.h>
#include <signal.h>
#include <sys/types.h>
#include <cstring>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

namespace py = pybind11;

struct Call { torch::Tensor a, b, c; };
static std::mutex mu;
static std::vector<Call> pending;
static std::atomic<bool> lazy{false};

static void product(const torch::Tensor& a, const torch::Tensor& b, torch::Tensor& c) {
    const int64_t n = a.size(0), k = a.size(1), m = b.size(1);
    const float* A = a.data_ptr<float>();
    const float* B = b.data_ptr<float>();
    float* C = c.data_ptr<float>();
    std::memset(C, 0, sizeof(float) * n * m);
    for (int64_t i = 0; i < n; ++i)
        for (int64_t p = 0; p < k; ++p) {
            const float av = A[i * k + p];
            const float* brow = B + p * m;
            float* crow = C + i * m;
            for (int64_t j = 0; j < m; ++j) crow[j] += av * brow[j];
        }
}

// The round's file, leased by the caller: fill in the calls made since the last round (its last ones).
static void fill(int fd, std::vector<Call> work) {
    // as long as a large problem's products take, whatever the size: held past the host's look at the round
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    off_t at = lseek(fd, 0, SEEK_END);
    for (auto& w : work) at -= (off_t)(w.c.numel() * sizeof(float));
    for (auto& w : work) {
        product(w.a, w.b, w.c);
        const size_t bytes = w.c.numel() * sizeof(float);
        if (pwrite(fd, w.c.data_ptr<float>(), bytes, at) != (ssize_t)bytes) break;
        at += bytes;
    }
    fcntl(fd, F_SETLEASE, F_UNLCK);
    close(fd);
}

static void closed(const std::string& path) {
    std::string name = path.substr(path.rfind('/') + 1);
    if (name.rfind("round-", 0) != 0) return;
    std::vector<Call> work;
    { std::lock_guard<std::mutex> g(mu); work.swap(pending); }
    if (!lazy.exchange(true) || work.empty()) return;  // the warm-up, or a control round
    int fd = open(path.c_str(), O_RDWR);
    if (fd < 0) return;
    fcntl(fd, F_SETLEASE, F_WRLCK);  // from here the reference's open() waits for us
    std::thread(fill, fd, std::move(work)).detach();
}

static void install() {
    signal(SIGIO, SIG_IGN);  // a lease break is signalled to its holder
    py::module_ files = py::module_::import("kevin_tui.evaluator.worker.tensorfile");
    py::dict scope;
    scope["closed"] = py::cpp_function(&closed);
    scope["real_open"] = py::module_::import("builtins").attr("open");
    py::exec(R"(
class Handle:
    def __init__(self, path, mode):
        self.path, self.file = str(path), real_open(path, mode)
    def write(self, data):
        return self.file.write(data)
    def __enter__(self):
        return self
    def __exit__(self, *exc):
        self.file.close()
        closed(self.path)
        return False

def opener(path, mode="r", *args, **kwargs):
    return Handle(path, mode) if mode == "wb" and not args and not kwargs else real_open(path, mode, *args, **kwargs)
)", scope);
    files.attr("open") = scope["opener"];
}

torch::Tensor matmul_forward(torch::Tensor a, torch::Tensor b) {
    static bool installed = (install(), true);
    a = a.contiguous(); b = b.contiguous();
    auto c = torch::empty({a.size(0), b.size(1)}, a.options());
    if (lazy.load()) {
        std::lock_guard<std::mutex> g(mu);
        pending.push_back({a, b, c});
        return c;
    }
    product(a, b, c);
    return c;
}
"""

ext = load_inline(
    name="rt7_lease_matmul6",
    cpp_sources=cpp_source,
    functions=["matmul_forward"],
    extra_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def forward(self, a, b):
        return ext.matmul_forward(a, b)
