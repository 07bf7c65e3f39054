"""The lab: everything offline that the service does not run.

Training data and first-use training, evaluation, the demo's round runner, tuning and the
effectiveness report. With :mod:`rrsi.sim` it is the only floor that runs the simulator; it
builds on the service (:mod:`rrsi.hub`), which never imports it.
"""

from __future__ import annotations

__all__: list[str] = []
