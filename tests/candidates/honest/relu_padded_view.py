"""Honest (must stay `correct`): the kernel writes rows into a padded buffer (row pitch rounded up
to 64 floats + 64) and returns the strided view out[:, :cols]: right values, non-contiguous
output, storage larger than the tensor.
"""
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

RELU_PADDED_CPP = r"""
torch::Tensor relu_padded(torch::Tensor x) {
    auto xc = x.contiguous();
    const int64_t rows = xc.size(0), cols = xc.size(1);
    const int64_t pitch = (cols + 63) / 64 * 64 + 64;
    auto buffer = torch::zeros({rows, pitch}, xc.options());
    const float* in = xc.data_ptr<float>();
    float* o = buffer.data_ptr<float>();
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) {
            const float v = in[r * cols + c];
            o[r * pitch + c] = v > 0.f ? v : 0.f;
        }
    return buffer.narrow(1, 0, cols);
}
"""
relu_ext = load_inline(name="honest_relu_padded", cpp_sources=RELU_PADDED_CPP, functions=["relu_padded"],
                       extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def forward(self, x):
        out = relu_ext.relu_padded(x)
        assert not out.is_contiguous()
        return out
