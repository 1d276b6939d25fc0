"""Honest (must stay `correct`): the C++ kernel splits the work over 2 std::threads and joins them
before returning.
"""
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

RELU_THREADS_CPP = r"""
#include <thread>
#include <vector>
torch::Tensor relu_threads(torch::Tensor x) {
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const int64_t n = xc.numel();
    const int workers = 2;
    std::vector<std::thread> pool;
    for (int w = 0; w < workers; ++w) {
        pool.emplace_back([=] {
            const int64_t lo = n * w / workers, hi = n * (w + 1) / workers;
            for (int64_t i = lo; i < hi; ++i) o[i] = in[i] > 0.f ? in[i] : 0.f;
        });
    }
    for (auto& t : pool) t.join();
    return out;
}
"""
relu_ext = load_inline(name="honest_relu_std_thread", cpp_sources=RELU_THREADS_CPP, functions=["relu_threads"],
                       extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def forward(self, x):
        return relu_ext.relu_threads(x)
