"""Ideas that work but do not pay yet, kept out of the main path with their tests.

- ``update_merge.merge_updates``: a step's elementwise state updates written as one
  multi-output compute, one loop nest (``LoweringOptions(merge_updates=True)``).
- ``step_outputs.TileStepOutputs``: a step tiled by its outputs, the rest of the step
  computed per tile (``scan_space(target, step_rules=[TileStepOutputs()])``), which
  needs the merged updates.

Together they are the CPU form of a persistent step, but MultiLevelTiling leaves the
product they move untiled and the candidates ran 7x slower than the best (notes.md,
section 3). Nothing here is imported by default.
"""
