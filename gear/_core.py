"""The native entry points, one extension per area (``gear/_data.pyx``: the
frozen model and the kernels' plans; ``gear/_tree.pyx``: tree algorithms;
``gear/_closed.pyx``: closed loops and the maximal-coordinate solver;
``gear/_rollouts.pyx``: native rollouts), gathered under one name for the
Python layers above them."""
from ._data import *  # noqa: F401,F403
from ._data import _padded  # noqa: F401
from ._tree import *  # noqa: F401,F403
from ._tree import _check_congruence  # noqa: F401
from ._closed import *  # noqa: F401,F403
from ._closed import _make_result  # noqa: F401
from ._rollouts import *  # noqa: F401,F403
