"""Batch mode: Kevin's evaluation protocol (k trajectories x n turns per problem) over many problems,
with the paper's table as output.

- `runner`: one backend, one driver per problem and trajectory, as a pipeline (`scheduling`); the
  run directory and its manifest (`manifest`); what it shows while it runs (`progress`).
- `remote`: evaluation as Ray tasks (the optional extra `kevin-tui[ray]`).
- `results`, `metrics`, `report`, `plot`: the run read back, the figures, the tables and the plot.
- `export`: every turn as RL training data (prompt, response, verdict, reward, return).
"""
