"""Every typing rule of the kernel language, in one place: this package.

In: ``tensor`` / ``constexpr`` / Python values handed over by the frontend (operators and
``tl`` builtins). Out: new ``tensor``s whose kir ops were appended through the active builder,
already typed. The interpreter and the GPU backend trust these types; they never infer.

Vocabulary: a *literal* is a Python number or a constexpr. It takes part in promotion only
when its kind (bool < int < float) is higher than the other operand's. Runtime scalar
arguments are 0-d tensors and promote like any tensor.

Layout: two foundations every rule builds on, ``building`` (the builder the rules append to,
``emit``) and ``promotion`` (literal typing, promotion, literals made values, block shapes);
then one module per op family, named as in ``aotk.interpreter`` and ``aotk.backend``:
``creation``, ``elementwise``, ``math``, ``views``, ``memory``, ``reduce``, ``scan``, ``combine``,
``dot``, ``atomics``, ``descriptors``, ``debug``, ``sort``, ``gather``, ``histogram``,
``inline_asm``, ``map_elementwise`` and ``control``; ``block_pointers``,
``random`` and ``standard`` are composed of the others' ops. Every rule is reachable as
``aotk.semantic.<name>``.
"""
from __future__ import annotations

import sys

from ..language.core import install_semantic
from .building import *      # noqa: F401,F403
from .promotion import *     # noqa: F401,F403
from .creation import *      # noqa: F401,F403
from .elementwise import *   # noqa: F401,F403
from .math import *         # noqa: F401,F403
from .views import *         # noqa: F401,F403
from .memory import *        # noqa: F401,F403
from .reduce import *        # noqa: F401,F403
from .scan import *          # noqa: F401,F403
from .combine import *       # noqa: F401,F403
from .dot import *           # noqa: F401,F403
from .atomics import *       # noqa: F401,F403
from .descriptors import *   # noqa: F401,F403
from .block_pointers import *   # noqa: F401,F403
from .debug import *         # noqa: F401,F403
from .sort import *          # noqa: F401,F403
from .gather import *        # noqa: F401,F403
from .histogram import *     # noqa: F401,F403
from .inline_asm import *    # noqa: F401,F403
from .map_elementwise import *  # noqa: F401,F403
from .random import *        # noqa: F401,F403
from .standard import *      # noqa: F401,F403
from .control import *       # noqa: F401,F403

# Tensor operators and methods (``x + y``, ``x.to()``, ``x[:, None]``) forward to these rules;
# see ``aotk.language.core.install_semantic`` for why they are handed over rather than imported.
install_semantic(sys.modules[__name__])
