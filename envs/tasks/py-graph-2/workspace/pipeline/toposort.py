"""Topological ordering with deterministic tie-breaking."""
import heapq

from .errors import CycleError


def toposort(deps):
    """Order the tasks of ``deps`` ({task: [prerequisites]}) so that every
    prerequisite comes before the tasks that need it.

    Tasks that are only mentioned as prerequisites are included too.  Among
    the tasks that are ready at the same time, the alphabetically smallest
    goes first.  Raises CycleError with the sorted list of all tasks that
    could not be ordered when there is a cycle.
    """
    nodes = set(deps)
    for prereqs in deps.values():
        nodes.update(prereqs)
    waiting_on = {n: 0 for n in nodes}
    needed_by = {n: [] for n in nodes}
    for task, prereqs in deps.items():
        for p in set(prereqs):
            waiting_on[task] += 1
            needed_by[p].append(task)
    ready = [n for n in nodes if waiting_on[n] == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        n = heapq.heappop(ready)
        order.append(n)
        for t in needed_by[n]:
            waiting_on[t] -= 1
            if waiting_on[t] == 0:
                heapq.heappush(ready, t)
    if len(order) < len(deps):
        raise CycleError(sorted(nodes - set(order)))
    return order
