from kevin_tui.evaluator.compiler_output import GeneratedFile, SourceMap, first_errors
from tests.conftest import candidate

NVCC_LOG = """Error building extension 'relu_cuda_ext': [1/3] nvcc -c /cache/relu/cuda.cu -o cuda.cuda.o
FAILED: cuda.cuda.o
/cache/relu/cuda.cu(10): error: identifier "undefined_bias" is undefined
          out[i] += undefined_bias;
                    ^

1 error detected in the compilation of "/cache/relu/cuda.cu".
/cache/relu/cuda.cu(10): error: identifier "undefined_bias" is undefined
ninja: build stopped: subcommand failed.
"""

GCC_LOG = """FAILED: main.o
/cache/x/main.cpp:5:12: error: 'foo' was not declared in this scope
/cache/x/main.cpp:9:1: error: expected ';' before '}' token
"""


def test_nvcc_errors_are_found_once_and_mapped_into_the_candidate():
    source = candidate("relu_cuda_broken.py")
    cuda_string = source.split('relu_cuda_source = """')[1].split('"""')[0]
    smap = SourceMap(source, {"cuda.cu": GeneratedFile(3, [cuda_string])})
    errors = first_errors(NVCC_LOG, smap)
    assert errors == [
        {
            "file": "cuda.cu",
            "line": 10,
            "message": 'identifier "undefined_bias" is undefined',
            "candidate_line": 11,
        }
    ]
    assert source.splitlines()[10].strip() == "out[i] += undefined_bias;"


def test_gcc_errors_in_order():
    errors = first_errors(GCC_LOG)
    assert [(e["file"], e["line"]) for e in errors] == [("main.cpp", 5), ("main.cpp", 9)]


def test_linker_errors():
    errors = first_errors("ImportError: /x/relu.so: undefined symbol: _Z4reluN2at6TensorE")
    assert errors[0]["message"].startswith("undefined symbol")


def test_line_outside_the_sources_maps_to_nothing():
    smap = SourceMap("x = 'a'\n", {"main.cpp": GeneratedFile(1, ["a"])})
    assert smap.candidate_line("main.cpp", 1) is None
    assert smap.candidate_line("main.cpp", 2) == 1
