"""Names a package exports but imports when first used (PEP 562), so that a command imports only
what it runs: ``tracekit compare`` of two saved analyses imports no reader, ``tracekit analyze``
no torch.

A package sets ``__getattr__ = lazy_exports(__name__, {name: "module" or ("module", "attribute")},
globals())``; a name found is kept in the package's namespace, so the hook runs once per name.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, MutableMapping


def lazy_exports(
    package: str, where: Mapping[str, str | tuple[str, str]], namespace: MutableMapping[str, Any]
) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package``: each name of ``where`` from its submodule
    (``"module"``: the same name there; ``("module", "attribute")``: another)."""

    def __getattr__(name: str) -> Any:
        found = where.get(name)
        if found is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, attribute = (found, name) if isinstance(found, str) else found
        value = getattr(importlib.import_module(f"{package}.{module}"), attribute)
        namespace[name] = value
        return value

    return __getattr__
