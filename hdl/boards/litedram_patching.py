"""How the LiteDRAM patches (``litedram_bank_lock``, ``litedram_refresh_request``,
``litedram_row_hit``, ``litedram_write_credit``) attach: a class's ``__init__`` extended while a
``with`` block elaborates LiteDRAM, restored after it."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

__all__ = ["after_init"]


@contextlib.contextmanager
def after_init(cls: type, extend: Callable[..., None]) -> Iterator[None]:
    """While active, every ``cls`` built runs ``extend(self, *args, **kwargs)`` after its own
    ``__init__`` (same arguments); the original ``__init__`` is back afterwards, even on error."""
    real = cls.__init__

    def init(self, *args, **kwargs) -> None:
        real(self, *args, **kwargs)
        extend(self, *args, **kwargs)

    cls.__init__ = init
    try:
        yield
    finally:
        cls.__init__ = real
