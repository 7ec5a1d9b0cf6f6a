"""Install order (depth-first, requirements first)."""
from .errors import CycleError, MissingPackage


def install_order(index, targets):
    """Packages to install for ``targets``, each exactly once, every package
    after all of its requirements.

    Targets are handled in the order given and requirements in the order the
    index lists them.  Raises MissingPackage for a name that is not in the
    index and CycleError when requirements loop (see CycleError.path).
    """
    order = []
    done = set()
    active = []

    def visit(name):
        if name in done:
            return
        if name not in index:
            raise MissingPackage(name)
        if name in active:
            raise CycleError(active[active.index(name):] + [name])
        active.append(name)
        done.add(name)
        for req in index[name]:
            visit(req)
        active.pop()
        order.append(name)

    for target in targets:
        visit(target)
    return order
