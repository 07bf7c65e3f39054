"""The heavy modules the commands call, each imported the first time a command uses it.

These pull Ray, torch, transformers or torch_geometric, which take seconds to import, while
``rrsi --help`` (and every argument error) must answer in well under a second. So the command
modules import this module at their top and call through it, ``lazy.demo.run_demo(...)``: the
attribute access imports :mod:`rrsi.lab.demo` then, once; Python caches it in ``sys.modules``.
Everything light (argparse, rich, :mod:`rrsi.schema`, :mod:`rrsi.config`, :mod:`rrsi.scenario`,
:mod:`rrsi.store`, :mod:`rrsi.traces`) is imported at the top of the command modules as usual.
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = [
    "LazyModule",
    "ray",
    "hub",
    "client",
    "demo",
    "tuning",
    "report",
    "rule_reflector",
    "lm_adapters",
    "lm_examples",
    "lm_data",
    "lm_generated",
    "lm_evaluation",
    "first_use",
    "lm_reflector",
    "attribution",
    "embedding",
    "features",
    "gnn",
    "gnn_training",
    "evaluate",
    "synthetic",
    "attribution_data",
    "generator",
]


class LazyModule:
    """Stands for the module ``name``; the first attribute read imports it."""

    def __init__(self, name: str) -> None:
        self._name = name

    def _module(self) -> ModuleType:
        return importlib.import_module(self._name)

    def __getattr__(self, attr: str):
        return getattr(self._module(), attr)

    def __repr__(self) -> str:
        return f"<lazy module {self._name!r}>"


ray = LazyModule("ray")
hub = LazyModule("rrsi.hub.hub")
client = LazyModule("rrsi.hub.client")
demo = LazyModule("rrsi.lab.demo")
tuning = LazyModule("rrsi.lab.tuning")
report = LazyModule("rrsi.lab.report")
rule_reflector = LazyModule("rrsi.hub.rule_reflector")
lm_adapters = LazyModule("rrsi.hub.lm.adapters")
lm_examples = LazyModule("rrsi.hub.lm.examples")
lm_data = LazyModule("rrsi.lab.reflector_data")
lm_generated = LazyModule("rrsi.lab.generated_reflector_data")
lm_evaluation = LazyModule("rrsi.lab.reflector_evaluation")
first_use = LazyModule("rrsi.lab.first_use")
lm_reflector = LazyModule("rrsi.hub.lm.lm_reflector")
attribution = LazyModule("rrsi.graph.attribution")
embedding = LazyModule("rrsi.graph.embedding")
features = LazyModule("rrsi.graph.features")
gnn = LazyModule("rrsi.graph.gnn")
gnn_training = LazyModule("rrsi.graph.gnn_training")
evaluate = LazyModule("rrsi.graph.evaluate")
synthetic = LazyModule("rrsi.sim.synthetic")
attribution_data = LazyModule("rrsi.sim.attribution_data")
generator = LazyModule("rrsi.sim.generator")
