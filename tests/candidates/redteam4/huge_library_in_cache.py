"""Attack (redteam4): a build whose library is as large as the candidate likes. An assembler `.fill` in a data
section makes the object file and the library that many bytes; the host moved whatever the builder left into
the persistent build cache (never evicted) and copied the library once more for the worker, so each such
candidate left its size on the user's disk for good, outside any scratch. The ReLU itself is honest.
Before the fix: `correct`, and a 64 MB library (plus its 64 MB object file) in `<cache>/builds/`."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SOURCE = """
asm(".pushsection .data\\n.globl rt4_ballast\\nrt4_ballast:\\n.fill 67108864,1,0x5a\\n.popsection");
torch::Tensor relu_forward(torch::Tensor x) {
    auto out = torch::empty_like(x);
    const float* in = x.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < x.numel(); ++i) o[i] = in[i] > 0.f ? in[i] : 0.f;
    return out;
}
"""

relu_ext = load_inline(name="rt4_ballast", cpp_sources=SOURCE, functions=["relu_forward"], extra_cflags=["-O1"])


class ModelNew(nn.Module):
    def forward(self, x):
        return relu_ext.relu_forward(x.contiguous())
