"""The converter: a TE graph with ``te.scan`` ops -> one S-TIR PrimFunc.

``convert.create_prim_func`` is the entry point (``scan_tir.create_prim_func``);
``options.LoweringOptions`` the choices it makes; ``vocabulary`` what the lowered function
looks like to everything downstream. The other modules are its passes: ``graph`` (scan
bodies and their checks), ``scan_lowering`` (one scan's nest), ``step_copies`` (state
copies made inside the step), ``te_rewrite`` (TE expression rewriting), ``te_scan`` (the
checked ``scan``), ``fast_math`` (vectorisable activations, a pass on the lowered function).
"""
