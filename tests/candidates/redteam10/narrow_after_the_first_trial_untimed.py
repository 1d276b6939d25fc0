"""tests/candidates/redteam8/lower_precision_after_the_first_trial.py (KernelBench level1/19 ReLU in C++, exact on its
first two calls, 14 mantissa bits on every later one) evaluated with `--strict --no-timing`.

Attack (redteam10): the trials' precision against float64 was measured on the first trial only, whose index the
candidate's worker is told; redteam8's fix added one secret timed call, which `--no-timing` has none of. So the
kernel, exact on trial 1 and narrow on every other, had its precision measured where it was exact.
TRUE verdict under --strict: rejected (lower_precision), as with timing.
Got before the fix (`--strict --no-timing --sandbox unshare`): correct, "correct on every trial (timing skipped)",
evidence.precision {candidate: 0.0, reference: 0.0}. After: the host names one trial in secret (the candidate sees
no difference between them): rejected, "lower_precision (... its error uses 47% of the tolerance, the float32
reference's own 0.0%)" unless the named trial is the first (1 in 7 with the default 5 trials and 2 near-copies).
This file only points at the kernel: evaluate the redteam8 file.
"""
