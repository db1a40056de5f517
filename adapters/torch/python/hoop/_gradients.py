"""Gradients reduced over the ranks, the part every framework adapter's DistributedOptimizer
shares: which gradients go together in one grouped allreduce, and how Horovod's
gradient_predivide_factor splits an average."""

from hoop._ops import Average, Sum


def _groups_of(count, num_groups, groups, variables):
    """Index groups of `count` gradients: one group of all by default; `num_groups` even parts;
    or `groups`, lists of variables (those in none form one more group)."""
    if groups is not None:
        position = {id(v): i for i, v in enumerate(variables)}
        picked = [[position[id(v)] for v in g if id(v) in position] for g in groups]
        taken = {i for g in picked for i in g}
        rest = [i for i in range(count) if i not in taken]
        return [g for g in picked + [rest] if g]
    if num_groups and num_groups > 0:
        step = -(-count // num_groups)
        return [list(range(i, min(i + step, count))) for i in range(0, count, step)]
    return [list(range(count))] if count else []


def reduce_gradients(grads, variables, grouped_allreduce, op=Average,
                     gradient_predivide_factor=1.0, num_groups=0, groups=None,
                     name="gradients"):
    """`grads` reduced over the ranks, None staying None, through
    grouped_allreduce(tensors, op, prescale, postscale, name) -> list, one call per group."""
    if gradient_predivide_factor != 1.0 and op not in (Average, Sum):
        raise ValueError("gradient_predivide_factor needs op Average or Sum")
    prescale, postscale = 1.0, 1.0
    if op == Average and gradient_predivide_factor != 1.0:
        # The runtime's Average divides by the set size; the factor moves part of it before.
        prescale, postscale = 1.0 / gradient_predivide_factor, gradient_predivide_factor
    present = [i for i, g in enumerate(grads) if g is not None]
    present_vars = [variables[i] for i in present] if variables is not None else []
    out = list(grads)
    for k, group in enumerate(_groups_of(len(present), num_groups, groups, present_vars)):
        reduced = grouped_allreduce([grads[present[j]] for j in group], op, prescale,
                                    postscale, f"{name}.{k}")
        for j, r in zip(group, reduced):
            out[present[j]] = r
    return out
