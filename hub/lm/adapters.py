"""Where LoRA adapters live, and how one is stored after training.

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
from rrsi.error_codes import ErrorCodeRegistry
from rrsi.errors import UserError
from rrsi.hub.lm.examples import ReflectionExample
from rrsi.hub.lm.lora_training import LoraTrainConfig, train_lora
from rrsi.hub.lm.template import TEMPLATE_VERSION

__all__ = [
    "adapter_base",
    "DEFAULT_ADAPTER",
    "DEFAULT_TRAINING",
    "adapter_dir",
    "resolve_adapter",
    "has_adapter",
    "save_trained",
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


def save_trained(
    examples: list[ReflectionExample],
    registry: ErrorCodeRegistry,
    config: LoraTrainConfig | dict,
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
