"""Red team 28 (an honest kernel rejected by the speed-of-light floor): the reference flattens its input, which is a
view (it writes nothing), and so does this kernel: `x.view(batch, -1)`, the reference's own function at the
reference's own speed. The floor any correct kernel must take is "writing its outputs once", counted from the
reference output's size (16 MB: 3.3 us on an H200, ~1-2 ms at a CPU's copy bandwidth), though the output is a view
of the input: nothing need be written. A view returns in microseconds.

True verdict: correct, no speed-of-light finding (a 1x kernel). Got: on CUDA `rejected`, "faster than any correct
kernel can be: ... writing its 16.78 MB of outputs alone takes ..." (host/speed_of_light.py against_the_bound, by
reading); on the CPU, where the same finding is a warning, `below_speed_of_light`: "timed below the time to write
the outputs".
"""

import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return x.view(x.size(0), -1)
