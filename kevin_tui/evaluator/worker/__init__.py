"""The worker side of the evaluator: code that runs in the sandboxed worker processes.

Nothing here is trusted by the host. The reference worker (the user's problem), the builder
(compilers on generated sources) and the candidate worker (generated code) each report through
`kevin_tui.evaluator.protocol`, and the host checks what they say.
"""
