"""Attack (level1/19_ReLU): torch's own ReLU (true speed exactly 1x), plus a native thread (std::thread: no
Python thread the tripwire sees) that streams over a 64 MB buffer — twice the L3 cache — whenever forward has
not been called for a while: while the reference worker is timed, and while this process runs its own control.
Its duty is kept to about 55% so the CPU it uses while the reference is timed stays under the host's allowance
(a quarter of the reference's round plus 20 ms). The reference's rounds are slowed (the shared L3 emptied, the
memory bus busy, one more runnable thread on a loaded machine), and most of what slows is the reference's loop
(drawing each call's input), which the host subtracts from the candidate's time as the reference's overhead; the
control only gets slower (CPU charged), which widens the interval's top only.

True verdict: `correct` at ~1x (or `rejected`: the candidate works while the reference is timed).

Second version (this file): the thread burns only after 15 ms without a call (longer than any gap between two of
its own calls, shorter than a reference round), ~70% duty, and `Channel.emit` (not among the watched functions) is
wrapped to report its calls 100x shorter, so that its time is no longer floored at its own figure (the clock check
allows twice the reference's loop overhead outside the calls).

Got (CPU, unshare, load average 7, 14:10): `correct, no measurable difference (measured 1.13x, 95% interval
0.08-928.95x)`, headline 1.0, a `monkey_patch` warning. The first version (burning after three of its own inter-call
gaps, ~55% duty, true samples) got `measured 0.10x (0.03-3.15x)`: it burned in its own rounds. Not a wrong verdict
on this machine; kept as the probe of the leftover-CPU allowance the README lists as open.

    python3 -m kevin_tui eval kevin_tui/kernelbench/level1/19_ReLU.py \
        tests/candidates/redteam12/hog_between_own_rounds.py --device cpu --json --no-git --no-profile \
        --shapes off --sandbox unshare
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

using Clock = std::chrono::steady_clock;
static std::atomic<int64_t> last_call{0};
static std::atomic<int64_t> gap_us{5000};
static std::atomic<bool> started{false};

static int64_t now_us() {
    return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now().time_since_epoch()).count();
}

static void hog() {
    std::vector<float> buffer(16 << 20, 1.0f);  // 64 MB
    volatile float sink = 0;
    size_t at = 0;
    for (;;) {
        int64_t idle = now_us() - last_call.load();
        if (idle > 15000) {  // longer than any gap between two of its own calls: not its round
            auto until = now_us() + 1400;
            while (now_us() < until) {  // stream: write every cache line
                for (int i = 0; i < 4096; ++i, at = (at + 16) % buffer.size()) buffer[at] += 1.0f;
            }
            sink = sink + buffer[at];
            std::this_thread::sleep_for(std::chrono::microseconds(600));
        } else {
            std::this_thread::sleep_for(std::chrono::microseconds(300));
        }
    }
}

void note_call() {
    int64_t now = now_us(), last = last_call.exchange(now);
    if (last && now - last < 200000) gap_us.store((gap_us.load() * 7 + (now - last)) / 8);
    if (!started.exchange(true)) std::thread(hog).detach();
}
"""

ext = load_inline(name="rt12_hog2", cpp_sources=cpp_source, functions=["note_call"], extra_cflags=["-O2"])


from kevin_tui.evaluator.worker import channel as _channel  # noqa: E402

_emit = _channel.Channel.emit


def _emit_smaller(self, event, **fields):  # its calls reported 100x shorter: the floor at its own figure goes
    if event == "round_done":
        fields["samples_ms"] = [s / 100 for s in fields["samples_ms"]]
    return _emit(self, event, **fields)


_channel.Channel.emit = _emit_smaller


class ModelNew(nn.Module):
    def forward(self, x):
        ext.note_call()
        return torch.relu(x)
