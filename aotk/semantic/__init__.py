"""Every typing rule of the kernel language, in one place: this package.

In: ``tensor`` / ``constexpr`` / Python values handed over by the frontend (operators and
``tl`` builtins). Out: new ``tensor``s whose kir ops were appended through the active builder,
already typed. The interpreter and the GPU backend trust these types; they never infer.

Vocabulary: a *literal* is a Python number or a constexpr. It takes part in promotion only
when its kind (bool < int < float) is higher than the other operand's. Runtime scalar
arguments are 0-d tensors and promote like any tensor.
"""
from __future__ import annotations

from .base import *          # noqa: F401,F403
from .base import _literal_dtype_against  # noqa: F401  (promotion tests read it)
from .memory import *        # noqa: F401,F403
from .reductions import *    # noqa: F401,F403
from .control import *       # noqa: F401,F403
from .views import *         # noqa: F401,F403
from .dot import *           # noqa: F401,F403
from .scans import *         # noqa: F401,F403
from .combine import *       # noqa: F401,F403
from .atomics import *       # noqa: F401,F403
from .debug import *         # noqa: F401,F403
from .descriptors import *   # noqa: F401,F403
