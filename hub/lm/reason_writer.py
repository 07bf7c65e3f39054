"""The LM's root cause for a text finding: what the blamed agent did wrong at its step, in one sentence of
its own, where the mode's sentence (:data:`~rrsi.graph.text_finding.TEMPLATES`) only names the kind.

The Reflector's base model (SmolLM2-135M-Instruct, :mod:`rrsi.hub.lm.base`) with a LoRA adapter reads
the task and the agent's words at the step the attribution blamed and answers one question: what mistake
did it make here. The shipped adapter (``models/reason_writer.pt`` beside this module, its card
``reason_writer.md``) was trained on Who&When Algorithm-Generated's human-written ``mistake_reason``
(:mod:`rrsi.hub.lm.reason_training`); nothing is read from a dataset at run time.

The prompt fits the model's context by a fixed budget (:func:`reason_messages`): the task's first
:data:`TASK_CHARS` characters; the agent's words with whitespace collapsed, and when longer than
:data:`HEAD_CHARS` + :data:`TAIL_CHARS`, their head and tail joined by " … " (the head holds the plan or
the claim, the tail the result handed on). Decoding is greedy, at most ``max_new_tokens`` tokens; the
answer is its first sentence, and it is kept only when it is 8 to :data:`MAX_CHARS` printable characters
(:func:`clean_answer`). A finding's root cause is that sentence followed by its mode's sentence (the
specific mistake, then its kind), or the mode's sentence alone when the answer failed the check.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

from rrsi.errors import UserError
from rrsi.reflection import Finding
from rrsi.schema import Trace
from rrsi.schema_base import _Model

__all__ = [
    "ReasonSettings",
    "ReasonItem",
    "ReasonWriter",
    "reason_messages",
    "clean_answer",
    "shipped_reason_path",
    "default_reason_writer",
    "worded_findings",
    "led_by",
    "WRITER_NAME",
    "TASK_CHARS",
    "HEAD_CHARS",
    "TAIL_CHARS",
    "MAX_CHARS",
    "WRITER_VERSION",
]

TASK_CHARS = 400
HEAD_CHARS = 600
TAIL_CHARS = 300
MAX_CHARS = 380
WRITER_VERSION = 1
WRITER_NAME = "reason_writer"
SYSTEM = "You review logs of AI agents working together. Answer in one sentence."
_SENTENCE_END = re.compile(r"(?<=[.!?])\s")


class ReasonSettings(_Model):
    """The adapter's shape and its training recipe (stored with the weights).

    Args:
        rank: LoRA rank; alpha is twice it. layers: LoRA on the top ``layers`` decoder blocks, every
        projection and feed-forward matrix. lr, epochs, seed: AdamW, one example a step, passes over the
        training pairs (a fractional last pass allowed). max_new_tokens: the answer's length bound.
    """

    rank: int = 8
    layers: int = 12
    lr: float = 5e-4
    epochs: float = 2.0
    seed: int = 0
    max_new_tokens: int = 40
    target_modules: list[str] = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


@dataclass(frozen=True)
class ReasonItem:
    """What the writer reads for one blamed agent: the task, the agent's name and its words at the step."""

    task: str
    agent: str
    words: str


def _squeeze(text: str) -> str:
    return " ".join(text.split())


def reason_messages(item: ReasonItem) -> list[dict[str, str]]:
    """The chat the writer answers (the module docstring's budget)."""
    words = _squeeze(item.words)
    if len(words) > HEAD_CHARS + TAIL_CHARS:
        words = f"{words[:HEAD_CHARS]} … {words[-TAIL_CHARS:]}"
    task = _squeeze(item.task)[:TASK_CHARS]
    ask = f"Task: {task}\n\n{item.agent} wrote:\n{words}\n\nWhat mistake did {item.agent} make here?"
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": ask}]


def clean_answer(text: str) -> str | None:
    """The answer's first sentence, whitespace collapsed; ``None`` unless 8 to :data:`MAX_CHARS` printable
    characters."""
    first = _SENTENCE_END.split(_squeeze(text), maxsplit=1)[0]
    if not 8 <= len(first) <= MAX_CHARS or not first.isprintable():
        return None
    return first


def shipped_reason_path() -> Path:
    """The adapter shipped with the package."""
    return Path(__file__).resolve().parent / "models" / "reason_writer.pt"


class ReasonWriter:
    """SmolLM2 with a root-cause adapter, on the CPU, for greedy one-sentence answers.

    Args:
        model: the causal LM with the adapter (peft-wrapped, or merged), in eval mode. tokenizer: its
        tokenizer. settings: the adapter's.
    """

    def __init__(self, model, tokenizer, settings: ReasonSettings) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.settings = settings

    @classmethod
    def load(cls, path: str | Path | None = None, base: str | Path | None = None) -> ReasonWriter:
        """The writer stored at ``path`` (default: the shipped one) on ``base`` (default: SmolLM2), the
        adapter merged into the base's weights (fp32).

        Raises:
            UserError: the file is missing or is not a root-cause adapter of this version.
        """
        import torch  # heavy: only a process that writes reasons loads it

        file = Path(path) if path is not None else shipped_reason_path()
        if not file.is_file():
            raise UserError(f"reason writer: no adapter at {file}; `rrsi train-reasons` writes one")
        state = torch.load(file, map_location="cpu", weights_only=True)
        if not isinstance(state, dict) or state.get("version") != WRITER_VERSION:
            found = state.get("version") if isinstance(state, dict) else type(state).__name__
            raise UserError(f"reason writer: {file} has version {found}, expected {WRITER_VERSION}")
        settings = ReasonSettings.model_validate(state["settings"])
        model, tokenizer = adapted_model(settings, base)
        from peft import set_peft_model_state_dict

        set_peft_model_state_dict(model, {k: v.float() for k, v in state["lora"].items()})
        return cls(model.merge_and_unload().eval(), tokenizer, settings)

    def prompt_ids(self, item: ReasonItem) -> list[int]:
        """The token ids of :func:`reason_messages`, ending where the answer starts."""
        text = self.tokenizer.apply_chat_template(reason_messages(item), add_generation_prompt=True, tokenize=False)
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def write(self, items: list[ReasonItem]) -> list[str | None]:
        """One checked sentence per item (:func:`clean_answer`), one greedy decode each."""
        import torch

        answers = []
        with torch.inference_mode():
            for item in items:
                ids = torch.tensor([self.prompt_ids(item)], device=self.model.device)
                out = self.model.generate(
                    input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False,
                    max_new_tokens=self.settings.max_new_tokens, pad_token_id=self.tokenizer.pad_token_id,
                )  # fmt: skip
                answers.append(clean_answer(self.tokenizer.decode(out[0, ids.shape[1] :], skip_special_tokens=True)))
        return answers


def adapted_model(settings: ReasonSettings, base: str | Path | None = None):
    """``(model, tokenizer)``: the base LM wrapped with a fresh LoRA adapter of ``settings``' shape."""
    from peft import LoraConfig, get_peft_model

    from rrsi.hub.lm.base import load_model, load_tokenizer

    model = load_model(base)
    blocks = model.config.num_hidden_layers
    config = LoraConfig(
        r=settings.rank, lora_alpha=2 * settings.rank, lora_dropout=0.0, target_modules=settings.target_modules,
        layers_to_transform=list(range(max(0, blocks - settings.layers), blocks)),
    )  # fmt: skip
    return get_peft_model(model, config), load_tokenizer(base)


@functools.cache
def default_reason_writer() -> ReasonWriter:
    """The shipped writer, loaded once per process."""
    return ReasonWriter.load()


def led_by(said: str, cause: str) -> str:
    """A finding's root cause: the writer's sentence, then the mode's; the sentence alone where both
    would pass a finding's 500 characters (a long agent name in the mode's sentence)."""
    both = f"{said} {cause}"
    return both if len(both) <= 500 else said


def worded_findings(
    writer: ReasonWriter, findings: list[Finding], traces: list[Trace], tasks: list[str]
) -> list[Finding]:
    """``findings`` with each root cause led by the writer's sentence about the agent's words at the
    finding's step, the mode's sentence after it (``tasks[i]``: what ``traces[i]`` was asked); where the
    answer failed its check the mode's sentence stands alone. A finding the writer spoke for names it in
    ``model`` beside the mode model."""
    where = {t.trace_id: (t, task) for t, task in zip(traces, tasks)}
    items = []
    for f in findings:
        trace, task = where[f.trace_id]
        words = next(s.scratchpad for s in trace.steps if s.step_id == f.step_id)
        items.append(ReasonItem(task=task, agent=f.agent, words=words))
    return [
        f
        if said is None
        else f.model_copy(update={"root_cause": led_by(said, f.root_cause), "model": f"{f.model}+{WRITER_NAME}"})
        for f, said in zip(findings, writer.write(items))
    ]
