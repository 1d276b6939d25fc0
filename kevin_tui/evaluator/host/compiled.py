"""`--compiled`: a candidate correct eagerly is run again under torch.compile, and that output judged too.

A kernel goes into models that are compiled: one that only works eagerly (a fake implementation that
lies about its output, a Python side effect the graph drops, a crash in inductor) is not `correct`, and
the verdict says "fails under torch.compile". The compiled run happens in the candidate's sandboxed
worker, but its output is judged by the reference worker against the reference's own, as an eager
trial's is. The graph-break count comes from torch._dynamo.explain in the candidate's process, so it is
information for the person, never a check: a candidate that wants to could also run eagerly when asked
to compile. What this catches is an honest kernel that breaks under compilation, not a dishonest one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kevin_tui.evaluator.protocol import ProtocolViolation
from kevin_tui.evaluator.verdict import Verdict, Warning_

if TYPE_CHECKING:
    from kevin_tui.evaluator.host.candidate_run import HostRun

COMPILED_TRIALS = 2  # the first trials' inputs, so a graph specialised to one call's values shows
SOURCE = "counted by torch._dynamo.explain in the candidate's own process (informational, not checked)"


@dataclass
class CompiledEvidence:
    trials: int = 0
    graph_breaks: int | None = None
    break_reasons: list[str] = field(default_factory=list)

    def add_to(self, verdict: Verdict) -> None:
        """The evidence, and a `graph_breaks` warning when torch.compile could not trace the whole forward."""
        verdict.evidence["compiled"] = {"trials": self.trials, "graph_breaks": self.graph_breaks,
                                        "break_reasons": self.break_reasons, "graph_breaks_source": SOURCE}  # fmt: skip
        reasons = f": {'; '.join(self.break_reasons)}" if self.break_reasons else ""
        if self.graph_breaks:
            said = f"correct under torch.compile, with {self.graph_breaks} graph break(s), {SOURCE}{reasons}"
        elif self.graph_breaks is None:
            said = f"correct under torch.compile; graph breaks unknown{reasons}"
        else:
            return
        verdict.warnings.append(Warning_("graph_breaks", said[:2000]))


def under_compile(run: HostRun) -> CompiledEvidence:
    """The candidate's ModelNew under torch.compile on the first trials' inputs, each output judged by the
    reference worker; a wrong output or a failure ends the run as "fails under torch.compile: ..."."""
    from kevin_tui.evaluator.host.candidate_run import Decided

    evidence = CompiledEvidence()
    run.deadline = run.phase_started + run.options.build_timeout_s  # compiling is a build (inductor runs g++)
    for index in range(min(COMPILED_TRIALS, run.options.trials)):
        label = f"trial {index + 1} under torch.compile"
        run.worker.send({"cmd": "compiled", "index": index, "inputs": str(run.files.path(f"in-{index}.kt"))})
        try:
            done = run.expect("compiled_done")
            if done["index"] != index:
                raise ProtocolViolation(f"compiled_done for trial {done['index']}, expected {index}")
            if index == 0:
                evidence.graph_breaks, evidence.break_reasons = done["graph_breaks"], done["break_reasons"]
            taken = run.take_output(done["path"], f"compiled-{index}.kt", f"eval-{run.evaluation}-compiled-{index}.kt")
            command: dict[str, Any] = {"cmd": "judge", "eval": run.evaluation, "trial": index, "path": str(taken),
                                       "label": label, "runs": ["compiled"]}  # fmt: skip
            run.judge(command)
        except Decided as decided:
            decided.verdict.message = f"fails under torch.compile: {decided.verdict.message}"
            raise
        evidence.trials += 1
    return evidence
