"""Specs as users type them (targets, constructor arguments, inputs), and the bundler that makes a
module's source stand alone: real files in temporary packages, no torch model run."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import torch

from kevin_tui.arguments import build_parser, module_spec
from kevin_tui.config import ConfigError, load_settings
from kevin_tui.usermodel.bundle import Bundler, import_root, module_name
from kevin_tui.usermodel.specs import (
    ModelSpec,
    SpecError,
    TensorSpec,
    ValueSpec,
    parse_init,
    parse_input,
    parse_inputs,
    parse_target,
    size_names,
)

EXAMPLES = Path(__file__).parents[1] / "examples"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("x=float33[8]", "unknown dtype float33"),
        ("x=float32[8,a]", "the shape must be whole numbers"),
        ("x=float32[-1]", "negative size"),
        ("tokens=int64[4,512]", "needs a range, e.g. tokens=int64[4,512]~randint(0,32000)"),
        ("x=float32[2]~randint(0,3)", "randint draws integers, float32 is a float type"),
        ("x=int64[3]~randint(5,2)", "low < high"),
        ("x=float32[2]~gamma(1)", "unknown distribution"),
        ("x=float32[4]~uniform(1)", "uniform takes 2 numbers, got 1"),
        ("x", "expected NAME=DTYPE[SHAPE]"),
    ],
)
def test_bad_input_specs_are_one_line_errors(text, message):
    with pytest.raises(SpecError, match=re.escape(message)) as caught:
        parse_input(text)
    assert "\n" not in str(caught.value) and text in str(caught.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [("dim", "expected NAME=VALUE"), ("dim=1,dim=2", "dim is given twice"), ("x=[1,", "not a Python literal")],
)
def test_bad_arguments_are_one_line_errors(text, message):
    with pytest.raises(SpecError, match=re.escape(message)):
        parse_init(text)


def test_bad_targets_and_mixed_input_names(tmp_path):
    with pytest.raises(SpecError, match=r"expected FILE\.py or FILE\.py:Name"):
        parse_target("blocks.txt")
    with pytest.raises(SpecError, match="no such file"):
        parse_target(f"{tmp_path}/missing.py:GeluGate")
    with pytest.raises(SpecError, match="name every input or none"):
        parse_inputs(["x=float32[8,16] float32[16]"])
    with pytest.raises(SpecError, match="x given twice"):
        parse_inputs(["x=float32[8]", "x=float32[8]"])


def test_specs_read_back_as_written_and_draw_what_they_say():
    init = parse_init("dim=1024,hidden=4096,act=gelu,shape=(2,3),name='a,b'")
    assert init == {"dim": 1024, "hidden": 4096, "act": "gelu", "shape": (2, 3), "name": "a,b"}
    specs = parse_inputs(["x=float32[8,128,64] tokens=int64[4,512]~randint(0,32000);m=bool[4]", "p=bf16[3]~uniform(0,1)",
                          "causal=True"])  # fmt: skip
    assert [s.text() for s in specs] == ["x=float32[8,128,64]", "tokens=int64[4,512]~randint(0,32000)", "m=bool[4]",
                                         "p=bfloat16[3]~uniform(0,1)", "causal=True"]  # fmt: skip
    assert parse_inputs([s.text() for s in specs]) == specs
    torch.manual_seed(0)
    x, tokens, mask, p, causal = (eval(s.expression(), {"torch": torch}) for s in specs)
    assert x.shape == (8, 128, 64) and x.dtype == torch.float32
    assert tokens.dtype == torch.int64 and tokens.min() >= 0 and tokens.max() < 32000
    assert mask.dtype == torch.bool and p.dtype == torch.bfloat16 and p.min() >= 0 and p.max() <= 1
    assert causal is True and isinstance(specs[4], ValueSpec) and isinstance(specs[0], TensorSpec)
    batch_size, size_128 = 3, 5  # noqa: F841 - the names the expression refers to
    named = specs[0].expression({(0, 8): "batch_size", (1, 128): "size_128"})
    assert named.startswith("torch.randn(batch_size, size_128, 64") and eval(named).shape == (3, 5, 64)


@pytest.fixture
def project(tmp_path) -> Path:
    shutil.copytree(EXAMPLES / "tinylm", tmp_path / "tinylm")
    return tmp_path


def test_a_block_bundled_with_the_helper_it_imports_from_its_own_package(project, on_path):
    blocks = project / "tinylm" / "blocks.py"
    assert import_root(blocks) == project and module_name(blocks) == "tinylm.blocks"
    bundler = Bundler([project])
    bundler.add(blocks, "GeluGate")
    text = bundler.text(project)
    assert "from .activations" not in text and "# from tinylm/activations.py" in text
    assert text.index("SQRT_2_OVER_PI =") < text.index("def gelu_tanh") < text.index("class GeluGate")
    assert "class RMSNorm" not in text and "class Attention" not in text  # only what GeluGate uses
    namespace: dict = {}
    exec(compile(text, "bundle", "exec"), namespace)  # it stands alone
    torch.manual_seed(0)
    block = namespace["GeluGate"](8, 16)
    from tinylm.blocks import GeluGate

    original = GeluGate(8, 16)
    original.load_state_dict(block.state_dict())
    x = torch.randn(2, 8)
    assert torch.equal(block(x), original(x))


def test_an_imported_alias_is_bound_after_its_definition(project):
    package = project / "tinylm"
    (package / "aliased.py").write_text(
        "import torch\nfrom .activations import gelu_tanh as act\n\n\nclass A(torch.nn.Module):\n"
        "    def forward(self, x):\n        return act(x)\n"
    )
    bundler = Bundler([project])
    bundler.add(package / "aliased.py", "A")
    text = bundler.text(project)
    assert text.index("def gelu_tanh") < text.index("act = gelu_tanh") < text.index("class A")
    namespace: dict = {}
    exec(compile(text, "bundle", "exec"), namespace)
    assert namespace["A"]()(torch.zeros(3)).tolist() == [0.0, 0.0, 0.0]


def test_a_model_of_several_blocks_follows_absolute_imports(project, on_path):
    bundler = Bundler([project])
    bundler.add(project / "tinylm" / "model.py", "TinyLM")
    text = bundler.text(project)
    for name in ("class TinyLM", "class Block", "class GeluGate", "class Attention", "class RMSNorm", "def gelu_tanh"):
        assert text.count(name) == 1, name
    assert text.index("class GeluGate") < text.index("class Block") < text.index("class TinyLM")


def test_what_cannot_be_bundled_is_said_in_one_line(project):
    package = project / "tinylm"
    (package / "whole.py").write_text("import tinylm.activations as act\n\nclass W:\n    f = act.gelu_tanh\n")
    with pytest.raises(SpecError, match=r"`import tinylm.activations` brings in a whole module of your code"):
        Bundler([project]).add(package / "whole.py", "W")
    (package / "clash.py").write_text(
        "from .activations import gelu_tanh\n\n\ndef SQRT_2_OVER_PI():\n    return 1\n\n\n"
        "class C:\n    a = gelu_tanh\n    b = SQRT_2_OVER_PI\n"
    )
    with pytest.raises(SpecError, match=r"two definitions named `SQRT_2_OVER_PI`|`SQRT_2_OVER_PI` means two things"):
        Bundler([project]).add(package / "clash.py", "C")


def test_the_problem_table_names_a_module_and_flags_win(tmp_path):
    (tmp_path / "blocks.py").write_text("")
    config = tmp_path / "kevin-tui.toml"
    config.write_text(
        f'[problem]\nmodule = "{tmp_path}/blocks.py:GeluGate"\ninit = {{ dim = 256, hidden = 512 }}\n'
        'inputs = ["x=float32[2,16,256]"]\nmode = "eval"\n'
    )
    settings = load_settings([config])
    spec = module_spec(build_parser().parse_args(["optimize"]), settings)
    assert spec == ModelSpec(f"{tmp_path}/blocks.py:GeluGate", "dim=256,hidden=512", ("x=float32[2,16,256]",), "eval")
    flags = build_parser().parse_args(["optimize", "--mode", "train", "--init", "dim=8,hidden=16"])
    assert module_spec(flags, settings) == ModelSpec(spec.target, "dim=8,hidden=16", spec.inputs, "train")
    config.write_text('[problem]\nmodul = "blocks.py:GeluGate"\n')
    with pytest.raises(ConfigError, match=r"\[problem\] has no key 'modul' \(it takes module, init, inputs, mode\)"):
        load_settings([config])


def test_every_size_of_the_inputs_gets_a_name_the_evaluator_can_change():
    """batch_size for the shared leading size, size_N for every other size above 1, one name per size."""
    specs = parse_inputs(["x=float32[2,8,64]", "mask=bool[2,8]"])
    assert size_names(specs) == {(0, 2): "batch_size", (1, 8): "size_8", (2, 64): "size_64"}
    with_bias = size_names(parse_inputs(["x=float32[2,8,64]", "bias=float32[64]", "t=float32[1]"]))  # no batch
    assert with_bias == {(0, 2): "size_2", (1, 8): "size_8", (2, 64): "size_64", (0, 64): "size_64"}
    assert size_names(parse_inputs(["x=float32[4,3]", "y=float32[5,3]"])) == {(0, 4): "size_4", (1, 3): "size_3",
                                                                           (0, 5): "size_5"}  # fmt: skip
