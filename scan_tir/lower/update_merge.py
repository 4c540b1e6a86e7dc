"""Writing a step's elementwise state updates as one multi-output compute (one loop nest).

topi's LSTM updates two states with two computes over the same (batch, hidden) domain,
``next_c`` and ``next_h``, the second reading the first at the same point. Lowered one by
one they become two loop nests, and no schedule primitive can put them back under one
loop: ``compute_at`` of ``next_c`` is refused (it is an output block of the step), and
``reverse_compute_at`` of ``next_h`` needs its other producer, the recurrent product,
moved first, which needs ``next_h`` moved first. With both updates in one nest (what
``te.compute`` makes of a multi-output compute, one block per output under shared loops),
the step can be tiled by its outputs and everything else computed per tile
(``step_outputs.TileStepOutputs``): the gate math fused with the recurrent product, one
fork/join per step.

Only a reader's own point of another update is inlined (``next_c`` into ``next_h``, which
recomputes ``f * c + i * g``: a few flops per element). Updates that
reduce, that read another update at another point, or that reach one through other ops of
the step (a stacked LSTM's second layer reads the first layer's ``h`` through its
recurrent product) keep their own computes.
"""

from __future__ import annotations

import tvm_ffi
from tvm import te, tirx

from .te_rewrite import load, map_reads, tensor_key


def _mergeable(tensor: te.Tensor) -> bool:
    op = tensor.op
    return (
        isinstance(op, te.ComputeOp)
        and op.num_outputs == 1
        and not list(op.reduce_axis)
        and len(op.axis) > 0
    )


def _extents(tensor: te.Tensor) -> tvm_ffi.StructuralKey:
    return tvm_ffi.StructuralKey([iv.dom.extent for iv in tensor.op.axis])


def _reaches(tensor: te.Tensor, targets: set, seen: set) -> bool:
    """Does ``tensor`` (or anything it reads, transitively) belong to ``targets``?"""
    key = tensor_key(tensor)
    if key in targets:
        return True
    if key in seen:
        return False
    seen.add(key)
    return any(_reaches(t, targets, seen) for t in tensor.op.input_tensors)


def _read_at_own_point(reader: te.Tensor, candidates: set) -> set | None:
    """Keys of the ``candidates`` that ``reader`` reads, or None if it reads one of them
    anywhere but at its own point (its axis variables, in order)."""
    own = [iv.var for iv in reader.op.axis]
    found: set = set()
    ok = [True]

    def on_load(tensor: te.Tensor, idx: list) -> tirx.Expr:
        key = tensor_key(tensor)
        if key in candidates:
            found.add(key)
            if len(idx) != len(own) or not all(i.same_as(v) for i, v in zip(idx, own)):
                ok[0] = False
        return load(tensor, idx)

    map_reads(list(reader.op.body), on_load)
    return found if ok[0] else None


def _components(links: dict) -> list[list]:
    """Connected components of the graph whose edges are ``links`` (key -> keys it reads)."""
    parent = {k: k for k in links}

    def root(k: tuple) -> tuple:
        while parent[k] != k:
            k = parent[k]
        return k

    for k, read in links.items():
        for other in read or ():
            parent[root(other)] = root(k)
    members: dict = {}
    for k in links:
        members.setdefault(root(k), []).append(k)
    return list(members.values())


def _groups(updates: list[te.Tensor]) -> list[list[te.Tensor]]:
    """Sets of two or more updates that can share one nest: same domain, linked by reads at
    the reader's own point, and no member reaching another through other ops."""
    by_domain: dict = {}
    for u in updates:
        if _mergeable(u):
            by_domain.setdefault(_extents(u), []).append(u)
    groups = []
    for same in by_domain.values():
        keys = {tensor_key(u): u for u in same}
        links = {k: _read_at_own_point(u, set(keys) - {k}) for k, u in keys.items()}
        for group in _components(links):
            inside = set(group)
            valid = len(group) > 1 and all(
                links[k] is not None
                and not any(
                    _reaches(t, inside, set())
                    for t in keys[k].op.input_tensors
                    if tensor_key(t) not in inside
                )
                for k in group
            )
            if valid:
                groups.append([keys[k] for k in group])
    return groups


def _producers_first(members: list[te.Tensor]) -> list[te.Tensor]:
    keys = {tensor_key(m) for m in members}
    done: list[te.Tensor] = []
    while len(done) < len(members):
        placed = {tensor_key(d) for d in done}
        for m in members:
            deps = {tensor_key(t) for t in m.op.input_tensors} & keys
            if tensor_key(m) not in placed and deps <= placed:
                done.append(m)
    return done


def merge_updates(updates: list[te.Tensor]) -> tuple[list[te.Tensor], dict[str, str]]:
    """``updates`` (a step's state updates, in state order) with each set that can share one
    loop nest replaced by the outputs of one multi-output compute, and the names that
    ``te.create_prim_func`` gives those computes' blocks and buffers mapped back to the
    original op names."""
    outputs: dict[tuple, te.Tensor] = {}
    renames: dict[str, str] = {}
    for group in _groups(updates):
        order = _producers_first(group)
        merged = _merge(order)
        for k, m in enumerate(order):
            outputs[tensor_key(m)] = merged.output(k)
            renames[f"{merged.name}_v{k}"] = m.op.name
    return [outputs.get(tensor_key(u), u) for u in updates], renames


def _merge(order: list[te.Tensor]) -> te.ComputeOp:
    """One compute over the first member's axes computing every member, each member's reads
    of earlier members replaced by their expressions."""
    axis = list(order[0].op.axis)
    exprs: dict[tuple, tirx.Expr] = {}
    for m in order:
        substitute = [(iv.var, a.var) for iv, a in zip(m.op.axis, axis)]

        def on_load(tensor: te.Tensor, idx: list) -> tirx.Expr:
            key = tensor_key(tensor)
            return exprs[key] if key in exprs else load(tensor, idx)

        (exprs[tensor_key(m)],) = map_reads(list(m.op.body), on_load, substitute)
    name = "_".join(m.op.name for m in order)
    first = order[0].op
    body = [exprs[tensor_key(m)] for m in order]
    return te._ffi_api.ComputeOp(name, first.tag, first.attrs, axis, body)
