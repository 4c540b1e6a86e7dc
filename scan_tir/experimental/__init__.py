"""Ideas that work but do not pay yet, kept off the main path with their tests.

``step_outputs.TileStepOutputs`` tiles a step by its outputs and computes the rest of the
step per tile (``scan_space(target, step_rules=[TileStepOutputs()])``), the CPU form of a
persistent step. It needs a step whose state updates share one loop nest, which the
converter's experimental option writes (``LoweringOptions(merge_updates=True,
copies_in_step=False)``, scan_tir/lower/update_merge.py: a converter pass, so it lives with
the converter). MultiLevelTiling leaves the product the rule moves untiled, and the
candidates ran 7x slower than the best (notes.md, section 3). Nothing on the main path
imports this package.
"""
