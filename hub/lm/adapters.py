"""Where LoRA adapters live, and the bundled adapter trained on first use.

Adapters are folders written by ``save_pretrained`` under ``default_home()/adapters/<name>``
with a ``training.json`` beside the weights (config, data, loss, time). An adapter is
written to a private temporary folder and renamed into place, so a reader never sees half
of one and two processes training the same name at once leave one complete adapter.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from pathlib import Path

from rrsi.config import default_home
from rrsi.error_codes import ErrorCodeRegistry, default_registry
from rrsi.errors import UserError
from rrsi.graph.log_training import default_whowhen_dir
from rrsi.hub.lm.data import Example, whowhen_examples
from rrsi.hub.lm.generated_data import examples_registry, generated_examples
from rrsi.hub.lm.lora_training import TrainConfig, train_lora
from rrsi.hub.lm.template import TEMPLATE_VERSION
from rrsi.scenario import bundled_scenario
from rrsi.sim.generator import pipeline_seeds

__all__ = [
    "adapter_base",
    "DEFAULT_ADAPTER",
    "DEFAULT_TRAINING",
    "adapter_dir",
    "resolve_adapter",
    "has_adapter",
    "save_trained",
    "default_examples",
    "ensure_adapter",
    "scenario_registry",
]

DEFAULT_ADAPTER = "default"
# Few steps on 2 CPU cores (first use must take under 5 minutes), so a learning rate far
# above the library's 2e-5 (which needs thousands of steps to move a LoRA adapter) and LoRA
# on every linear layer of the top 8 blocks (q/v alone reached the same loss in 60 steps
# that this reaches in 20). The decisions (act or not, root agent) weigh as much as the texts
# together: at 0.4 the adapter learned the texts and still answered "no action" everywhere.
# No LoRA dropout: drawing its masks took 16 % of a CPU step's time; 44 steps without it
# take less time than 40 with it (3.2 s a step against 4.1) and scored as well on held-out
# incidents (40 without it: a point lower on the generated pipelines' error types).
DEFAULT_TRAINING = {
    "steps": 44,
    "batch_size": 4,
    "lr": 3e-3,
    "lora_layers": 8,
    "lora_dropout": 0.0,
    "seed": 0,
    "weights": {"decision": 1.0},
    "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
}
DEFAULT_PIPELINES = 60
DEFAULT_PER_PIPELINE = 4
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$")


def adapter_dir(name: str) -> Path:
    """``default_home()/adapters/<name>``.

    Raises:
        UserError: ``name`` is not a plain folder name.
    """
    if not _NAME.match(name):
        raise UserError(f"adapter name: {name!r} must be letters, digits, '_', '.', '-' (at most 64)")
    return default_home() / "adapters" / name


def resolve_adapter(name_or_path: str | Path) -> Path:
    """A folder path as given (it contains a ``/`` or is an existing folder), else the named
    adapter under ``default_home()/adapters``."""
    text = str(name_or_path)
    return Path(text) if ("/" in text or Path(text).is_dir()) else adapter_dir(text)


def has_adapter(path: Path) -> bool:
    """An adapter folder fit for the current prompt and answer template.

    One whose ``training.json`` records another :data:`~rrsi.hub.lm.template.TEMPLATE_VERSION`
    (none recorded: version 1) counts as missing, so the bundled adapter is trained again
    after an upgrade; a folder without ``training.json`` (trained elsewhere) is taken as is.
    """
    if not (path / "adapter_config.json").is_file():
        return False
    info = path / "training.json"
    if not info.is_file():
        return True
    try:
        return json.loads(info.read_text()).get("template", 1) == TEMPLATE_VERSION
    except (OSError, ValueError):
        return False


def adapter_base(adapter: str | Path | None) -> Path | None:
    """The base model an adapter was trained on, when it says so and that folder is here.

    Read from its ``training.json`` (``config.base``, what ``rrsi train-reflector --base`` wrote),
    else from peft's ``adapter_config.json`` (``base_model_name_or_path``); None (the bundled base)
    when neither names a folder that exists.
    """
    if adapter is None:
        return None
    folder = Path(adapter)
    candidates = []
    for name, key in (("training.json", ("config", "base")), ("adapter_config.json", ("base_model_name_or_path",))):
        try:
            value = json.loads((folder / name).read_text())
            for k in key:
                value = value.get(k) if isinstance(value, dict) else None
        except (OSError, ValueError):
            value = None
        if isinstance(value, str) and value:
            candidates.append(Path(value))
    return next((c for c in candidates if (c / "config.json").is_file()), None)


def scenario_registry(scenario=None) -> ErrorCodeRegistry:
    """The built-in error codes plus those the scenario's agents declare."""
    registry = default_registry()
    for spec in (scenario or bundled_scenario()).specs():
        registry.register_agent(spec)
    return registry


def save_trained(
    examples: list[Example],
    registry: ErrorCodeRegistry,
    config: TrainConfig | dict,
    name: str | Path,
    progress: bool = True,
    info: dict | None = None,
) -> tuple[Path, dict]:
    """Train on ``examples`` and store the adapter as ``name`` (atomic replace).

    Args:
        name: an adapter name or folder path (:func:`resolve_adapter`).
        info: extra entries for ``training.json``.

    Returns:
        the adapter folder and the training report (without the model).
    """
    target = resolve_adapter(name)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        report = train_lora(examples, registry, config, out=tmp, progress=progress)
        report.pop("model")
        cfg = config if isinstance(config, dict) else config.model_dump()
        sources = sorted({e.source for e in examples})
        (tmp / "training.json").write_text(
            json.dumps(
                {"template": TEMPLATE_VERSION, "config": cfg, "sources": sources, **(info or {}), **report}, indent=2
            )
        )
        if target.exists():
            shutil.rmtree(target, ignore_errors=True)
        try:
            tmp.rename(target)
        except OSError:
            if not has_adapter(target):
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target, report


def default_examples(workers: int = 1) -> tuple[list[Example], dict]:
    """What the bundled adapter learns from, and a description of it for ``training.json``.

    Incidents of :data:`DEFAULT_PIPELINES` generated pipelines (train seeds from 0, never a
    bundled scenario: those stay held out for evaluation), :data:`DEFAULT_PER_PIPELINE` each,
    plus the ``train`` split of Who&When's annotated mistake reasons when the logs are at hand
    (``RRSI_WHOWHEN``, else ``../shared/whowhen/Algorithm-Generated``; root causes only).
    ``workers``: processes simulating the pipelines (the same examples whatever the number).
    """
    examples = generated_examples(DEFAULT_PIPELINES, DEFAULT_PER_PIPELINE, seed=0, workers=workers)
    seeds = pipeline_seeds("train", DEFAULT_PIPELINES)
    info: dict = {
        "generated": {
            "pipelines": DEFAULT_PIPELINES,
            "per_pipeline": DEFAULT_PER_PIPELINE,
            "seeds": [seeds[0], seeds[-1]],
        }
    }
    folder = default_whowhen_dir()
    if folder is not None:
        examples += whowhen_examples(folder, "train")
        info["whowhen"] = str(folder)
    return examples, info


def ensure_adapter(
    name: str = DEFAULT_ADAPTER, progress: bool = True, base: str | None = None, workers: int = 1
) -> Path:
    """The adapter ``name``, training the bundled one on first use (:func:`default_examples`,
    :data:`DEFAULT_TRAINING` steps).

    Args:
        name: adapter folder name under ``default_home()/adapters``.
        progress: show a progress bar while training.
        base: base model for a first training (default: SmolLM2-135M-Instruct).
        workers: processes simulating the training incidents (forked: pass more than 1 only from
            a process that may fork, e.g. a command's main process before it starts Ray).
    """
    path = adapter_dir(name)
    if has_adapter(path):
        return path
    examples, info = default_examples(workers)
    config = {**DEFAULT_TRAINING, "base": base}
    path, _ = save_trained(examples, examples_registry(examples), config, name, progress, info=info)
    return path
