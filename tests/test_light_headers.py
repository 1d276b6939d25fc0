from kevin_tui.evaluator.worker.light_headers import (
    EXTRAS,
    includes_op_headers,
    light_prelude,
    reaches,
    torch_include_dir,
    undefined_names,
    without_heavy_includes,
)
from tests.conftest import candidate

KEVIN_STYLE = """
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void scale(const float* x, float* y, float s, int n) { int i = threadIdx.x; if (i < n) y[i] = s * x[i]; }

torch::Tensor scale_cuda(torch::Tensor x, float s) {
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "float only");
    auto y = torch::empty_like(x);
    auto z = at::zeros({4}, x.options());
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "scale", [&] {});
    scale<<<1, 256, 0, at::cuda::getCurrentCUDAStream()>>>(x.data_ptr<float>(), y.data_ptr<float>(), s, x.numel());
    return y;
}
"""


def test_prelude_has_what_the_source_uses():
    prelude = light_prelude([KEVIN_STYLE])
    assert "inline at::Tensor empty_like(const at::Tensor & self" in prelude  # torch's op headers, copied
    assert "inline at::Tensor zeros(at::IntArrayRef size" in prelude
    for header in (
        "ATen/core/Tensor.h",
        "ATen/Dispatch.h",
        "cuda_runtime.h",
    ):
        assert f"#include <{header}>" in prelude, header
    assert "CUDAContext.h" not in prelude  # the source calls getCurrentCUDAStream without including it
    assert "constexpr auto kFloat32 = at::kFloat;" in prelude and "using namespace at;" in prelude
    assert "torch/types.h" not in prelude and "torch/extension.h" not in prelude


def test_tensor_operators_come_without_all_of_aten_functions():
    """ATen/TensorOperators.h includes ATen/Functions.h (every ATen function, a third of the prelude's
    text, parsed three times by nvcc) unless AT_PER_OPERATOR_HEADERS is defined, only around it: the
    operators' definitions are the same, and the op headers the source calls come one by one, also for
    an unqualified call (`zeros_like(x)` finds at::zeros_like by argument lookup), never for a method.
    Both come as torch's own text, without the four headers they include for nothing they define
    (ATen/Context.h and DeviceGuard.h: a light build took 31 CPU-seconds of nvcc with them, 18 without)."""
    prelude = light_prelude(["auto y = zeros_like(x) / (x * x).sum(); auto m = std::max(1, 2);"])
    lines = prelude.splitlines()
    start, end = lines.index("#define AT_PER_OPERATOR_HEADERS"), lines.index("#undef AT_PER_OPERATOR_HEADERS")
    operators = "\n".join(lines[start:end])
    assert "DEFINE_OPERATOR(op, body, reverse_scalar_body)" in operators  # TensorOperators.h's own text
    assert "inline at::Tensor empty_like(const at::Tensor & self" in operators
    assert "#include <ATen/ops/empty_like_ops.h>" in operators and "pragma once" not in prelude
    assert "inline at::Tensor zeros_like(const at::Tensor & self" in prelude
    assert prelude.count("inline at::Tensor empty_like(const at::Tensor & self, at::TensorOptions") == 1
    called = light_prelude(["auto y = torch::empty_like(x) / (x * x).sum();"])
    assert called.count("empty_like(const at::Tensor & self, at::TensorOptions") == 1  # called: not again
    assert "#include <ATen/ops/empty_like.h>" not in called
    for unused in ("Context", "DeviceGuard", "TensorUtils", "TracerMode"):
        assert f"#include <ATen/{unused}.h>" not in lines
    assert "#include <ATen/ops/sum.h>" not in lines and "#include <ATen/ops/max.h>" not in lines


def test_op_headers_are_copied_unless_a_header_included_after_them_includes_one_again():
    """The copies have no `#pragma once`: a torch header the build includes after them that includes an op
    header again, itself or through its own includes (ATen/ExpandUtils.h includes ATen/ops/view.h), would define
    its functions twice, so then the op headers are included as they are. The headers most kernels need
    (Dispatch.h, CUDAContext.h, CUDAGuard.h, CUDAException.h, DeviceGuard.h) include none in this torch: they
    keep the copies (a light build of such a kernel: 18.2 s of nvcc with the op headers included, 13.4 s)."""
    for source in (
        "#include <ATen/ExpandUtils.h>\nauto y = zeros_like(x) / (x * x).sum();",
        '#include "my_helpers.h"\nauto y = zeros_like(x) / (x * x).sum();',  # a file we cannot read
    ):
        lines = light_prelude([source]).splitlines()
        assert "#include <ATen/TensorOperators.h>" in lines and "#include <ATen/ops/zeros_like.h>" in lines, source
        assert not any("DEFINE_OPERATOR(op, body, reverse_scalar_body)" in line for line in lines)
    assert includes_op_headers("ATen/ExpandUtils.h") and includes_op_headers("ATen/Functions.h")
    for source in (
        "#include <ATen/cuda/CUDAContext.h>\nauto y = zeros_like(x) / (x * x).sum();",
        "auto s = at::cuda::getCurrentCUDAStream(); auto y = zeros_like(x) / (x * x).sum();",
        "at::DeviceGuard guard(x.device()); C10_CUDA_KERNEL_LAUNCH_CHECK(); auto y = zeros_like(x) / (x * x).sum();",
        'AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "f", [&] {}); const c10::cuda::CUDAGuard g(x.device());',
    ):
        prelude = light_prelude([source])
        lines = prelude.splitlines()
        assert "DEFINE_OPERATOR(op, body, reverse_scalar_body)" in prelude, source
        assert "#include <ATen/ops/zeros_like.h>" not in lines and "#include <ATen/TensorOperators.h>" not in lines
    assert "#include <ATen/DeviceGuard.h>" in light_prelude(["at::DeviceGuard guard(x.device());"])


def test_the_prelude_adds_only_headers_load_inlines_own_first_line_includes():
    """load_inline starts the CUDA source with torch/types.h, which includes ATen/Dispatch.h (AT_DISPATCH) but not
    ATen/cuda/CUDAContext.h, c10/cuda/CUDAGuard.h or CUDAException.h: a source using getCurrentCUDAStream, a
    CUDAGuard or C10_CUDA_KERNEL_LAUNCH_CHECK without including their headers fails a plain build, and a light
    prelude that supplied them made it `correct` here and broken in the user's load_inline."""
    root = torch_include_dir()

    def standard_build_has(header: str) -> bool:
        target = (root / header).resolve() if (root / header).is_file() else None
        return reaches("torch/types.h", lambda name, path: name == header or (target is not None and path == target))

    for _, header in EXTRAS:
        assert standard_build_has(header), header
    for header in ("ATen/cuda/CUDAContext.h", "c10/cuda/CUDAGuard.h", "c10/cuda/CUDAException.h"):
        assert not standard_build_has(header), header
    forgot = """
#include <torch/extension.h>
torch::Tensor f(torch::Tensor x) {
    const c10::cuda::CUDAGuard guard(x.device());
    auto stream = at::cuda::getCurrentCUDAStream();
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return x;
}"""
    assert not any("cuda/CUDA" in line for line in light_prelude([forgot]).splitlines())
    included = "#include <ATen/cuda/CUDAContext.h>\n#include <c10/cuda/CUDAGuard.h>\n" + forgot
    kept = [line for line in without_heavy_includes(included).splitlines() if "cuda/CUDA" in line]
    assert kept == ["#include <ATen/cuda/CUDAContext.h>", "#include <c10/cuda/CUDAGuard.h>"]
    assert not reaches("ATen/cuda/CUDAContext.h", lambda name, path: path == (root / "c10/cuda/CUDAGuard.h").resolve())


def test_a_function_only_aten_functions_defines_keeps_that_header():
    """`at::numel(t)` is defined in ATen/Functions.h itself (no op header has it): the operators header
    is then included as it is, with Functions.h, or the light build would fail and build twice."""
    lines = light_prelude(["int64_t n = torch::numel(x);"]).splitlines()
    assert "#include <ATen/TensorOperators.h>" in lines and "#define AT_PER_OPERATOR_HEADERS" not in lines


def test_names_without_an_op_header_are_not_included():
    prelude = light_prelude(["auto t = torch::not_an_op(x); int n = x.numel();"])
    assert "not_an_op" not in prelude


def test_bindings_or_torch_modules_need_the_full_headers():
    assert light_prelude(['PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("f", &f); }']) is None
    assert light_prelude(["torch::nn::Linear lin(3, 4);"]) is None


def test_heavy_includes_are_blanked_without_moving_lines():
    src = "#include <torch/extension.h>\n#include <vector>\n  #include <torch/types.h>\nint x;\n"
    out = without_heavy_includes(src)
    assert out.count("\n") == src.count("\n")
    assert "torch/" not in out and "#include <vector>" in out


def test_test_candidates_get_a_light_prelude():
    source = candidate("relu_cuda.py")
    cuda = source.split('relu_cuda_source = """')[1].split('"""')[0]
    assert light_prelude([cuda]) is not None


def test_a_light_build_failing_on_names_no_header_defines_is_the_candidates_own_error():
    """Then the standard headers are not tried: they would fail the same way, ~40 s later."""
    own = 'cuda.cu(11): error: identifier "undefined_bias" is undefined\n1 error detected in the compilation'
    assert undefined_names(own) == ["undefined_bias"]
    from_torch = 'cuda.cu(4): error: identifier "TORCH_CHECK" is undefined'  # the light prelude lacked it
    assert undefined_names(from_torch) == []
    mixed = own + '\ncuda.cu(12): error: expected a ";"'
    assert undefined_names(mixed) == [] and undefined_names("ninja: build stopped") == []
