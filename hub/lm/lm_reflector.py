"""The LM Reflector: a fine-tuned causal LM writes the joint reflection of an incident.

Same interface as :class:`~rrsi.hub.rule_reflector.RuleReflector`: ``reflect(incident_id,
attribution, root_records, specs)`` returns a validated :class:`~rrsi.schema.JointReflection`
or ``None``. Only agents with root-attributed failing records get a reflection; an incident
without any returns ``None`` without running the model.

Decoding is template-constrained (:mod:`rrsi.hub.lm.constrained`), so outputs parse and
validate by construction; each one is still parsed and validated against the incident's
:class:`~rrsi.schema.ReflectionContext` before it is returned. An output that fails is
never returned for application: it is logged with the incident id and the reason, counted
in ``rejected``, and the call returns ``None`` for that incident (the hub then skips the
incident or asks its fallback Reflector), so one bad generation never stops a batch.

An agent's confidence is P(error type) · P(action choice) under the constrained
distribution: the model's own probability of the decision the update acts on.
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path

import torch

from rrsi.devices import resolve_device
from rrsi.error_codes import ErrorCodeRegistry
from rrsi.errors import SchemaError, UserError
from rrsi.hub.lm.adapters import adapter_base
from rrsi.hub.lm.base import bf16_fast, load_model, load_tokenizer, quantize_int8
from rrsi.hub.lm.constrained import ConstrainedDecoder, Decoded, DecodeOptions
from rrsi.hub.lm.prompt import IncidentInput, Prepared, PromptConfig, chat_prefix, chat_prompt, prepare
from rrsi.hub.lm.template import answer_text
from rrsi.schema import AgentSpec, Attribution, JointReflection, Reflection, StepRecord, validate

__all__ = ["LMReflector", "parse_output", "load_adapted"]

log = logging.getLogger(__name__)


def _answer_object(text: str) -> dict:
    """The model's answer parsed as a JSON object with a ``reflections`` list.

    Raises:
        SchemaError: not JSON, or not that shape.
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SchemaError(f"output: not JSON ({exc.msg} at {exc.pos})") from None
    if not isinstance(data, dict) or not isinstance(data.get("reflections"), list):
        raise SchemaError("output: expected an object with root_agent and a reflections list")
    return data


def _agent_reflection(i: int, r: object, logp: dict[str, float], context: dict) -> Reflection:
    """The answer's ``i``-th reflection ``r`` validated against ``context``: without the template's
    restated votes (``evidence``), its actions given the reflection's agent unless they name one,
    and as confidence P(error type) · P(action choice) from ``logp``, capped at 1.

    Raises:
        SchemaError: not an object with an actions list, or a reflection the schema refuses.
    """
    if not isinstance(r, dict) or not isinstance(r.get("actions", []), list):
        raise SchemaError(
            f"output.reflections[{i}]: expected an object with agent, error_type, root_cause, correction, actions"
        )
    confidence = math.exp(logp.get(f"{i}.error_type", 0.0) + logp.get(f"{i}.actions", 0.0))
    actions = [{"agent": r.get("agent"), **a} if isinstance(a, dict) else a for a in r.get("actions", [])]
    body = {k: v for k, v in r.items() if k not in ("actions", "evidence")}  # evidence: the template's restated votes
    return validate(
        Reflection,
        {**body, "confidence": min(1.0, confidence), "actions": actions},
        context=context,
        where=f"output.reflections[{i}]",
    )


def parse_output(text: str, logp: dict[str, float], prep: Prepared, backend: str = "lm") -> JointReflection:
    """The joint reflection a model output describes, validated against the incident.

    Args:
        text: the model's JSON answer.
        logp: log-probability of each choice (``"{i}.error_type"``, ``"{i}.actions"``).
        prep: the prepared incident the answer is about.
        backend: recorded in the reflection.

    Raises:
        SchemaError: not JSON, wrong shape, or a reflection the schema refuses; the message
            names the field.
    """
    data = _answer_object(text)
    context = prep.context.model_dump()
    reflections = [_agent_reflection(i, r, logp, context) for i, r in enumerate(data["reflections"])]
    root = data.get("root_agent")
    lead = next((r for r in reflections if r.agent == root), None)
    if lead is None:
        raise SchemaError(
            f"output.root_agent: {root!r} needs a reflection; reflections cover {[r.agent for r in reflections]}"
        )
    return validate(
        JointReflection,
        {
            "incident_id": prep.incident.incident_id,
            "root_agent": root,
            "root_cause": lead.root_cause,
            "reflections": [r.model_dump() for r in reflections],
            "backend": backend,
        },
        where="output",
    )


def load_adapted(
    adapter: str | Path | None,
    base: str | Path | None = None,
    device: str = "cpu",
    merge: bool = True,
    precision: str = "fp32",
):
    """The base model with the LoRA ``adapter`` applied (merged into the weights when ``merge``).

    Args:
        precision: ``bf16`` casts the merged weights to bfloat16 (merging happens in the
            load dtype first); ``auto`` does so where bf16 is native (:func:`bf16_fast`);
            ``int8`` quantizes the merged model's linear layers (:func:`quantize_int8`, CPU only;
            the answers may differ from fp32's).

    Raises:
        UserError: ``int8`` on a CUDA device or without merging.
    """
    from peft import PeftModel

    if precision == "int8" and (device.startswith("cuda") or not merge):
        raise UserError(f"precision: int8 needs device='cpu' and merge=True (got device={device!r}, merge={merge})")
    model = load_model(base, device=device)
    if adapter is not None:
        model = PeftModel.from_pretrained(model, str(adapter))
        if merge:
            model = model.merge_and_unload()
    if precision == "int8":
        return quantize_int8(model.eval())
    if precision == "bf16" or (precision == "auto" and merge and bf16_fast(device)):
        model = model.to(torch.bfloat16)
    return model.eval()


class LMReflector:
    """Joint reflections from a (LoRA-adapted) causal LM under constrained decoding.

    Args:
        registry: error codes, for the domain terms of the agents' codes.
        adapter: a LoRA adapter folder (``None``: the base model alone).
        base: the base model (see :func:`~rrsi.hub.lm.base.base_model_dir`); by default the
            one the adapter's own config names (:func:`~rrsi.hub.lm.adapters.adapter_base`).
        device: ``auto`` (CUDA when present), ``cpu`` or ``cuda``.
        prompt: prompt limits; must match the ones the adapter was trained with.
        batch_size: incidents decoded together.
        model, tokenizer: an already loaded model and tokenizer (then ``adapter``/``base``
            are not read).
        precision: ``fp32``, ``bf16``, ``auto`` (bf16 where it is native: AMX CPUs, CUDA) or
            ``int8`` (dynamic int8 linear layers, CPU only; answers may differ from fp32's).
        decode: the decoder's speedups (:class:`~rrsi.hub.lm.constrained.DecodeOptions`; default
            all on; none changes the answer).
    """

    backend = "lm"

    def __init__(
        self,
        registry: ErrorCodeRegistry,
        adapter: str | Path | None = None,
        base: str | Path | None = None,
        device: str = "auto",
        prompt: PromptConfig | None = None,
        batch_size: int = 8,
        model=None,
        tokenizer=None,
        precision: str = "auto",
        decode: DecodeOptions | None = None,
    ) -> None:
        if batch_size < 1:
            raise SchemaError(f"batch_size: must be >= 1 (got {batch_size})")
        if precision not in ("auto", "fp32", "bf16", "int8"):
            raise SchemaError(f"precision: expected 'auto', 'fp32', 'bf16' or 'int8' (got {precision!r})")
        self.registry = registry
        self.device = resolve_device(device)
        base = base if base is not None else adapter_base(adapter)  # served on the base it was trained on
        self.tokenizer = tokenizer or load_tokenizer(base)
        self.model = model if model is not None else load_adapted(adapter, base, self.device, precision=precision)
        prefix = chat_prefix(self.tokenizer)
        self.decoder = ConstrainedDecoder(self.model, self.tokenizer, prefix=prefix, options=decode)
        self.prompt = prompt or PromptConfig()
        self.batch_size = batch_size
        self.rejected = 0
        self.tokens = 0

    def reflect(
        self, incident_id: str, attribution: Attribution, root_records: list[StepRecord], specs: dict[str, AgentSpec]
    ) -> JointReflection | None:
        """Reflect on the root-attributed failing records of one incident; None without evidence."""
        return self.reflect_batch([IncidentInput(incident_id, attribution, root_records, specs)])[0]

    def reflect_batch(self, incidents: list[IncidentInput]) -> list[JointReflection | None]:
        """One joint reflection (or None) per incident, decoding ``batch_size`` at a time."""
        preps = [prepare(i, self.registry, self.prompt) for i in incidents]
        results: list[JointReflection | None] = [None] * len(incidents)
        todo = [k for k, p in enumerate(preps) if p is not None]
        for start in range(0, len(todo), self.batch_size):
            chunk = todo[start : start + self.batch_size]
            for k, out in zip(chunk, self.generate([preps[k] for k in chunk])):
                results[k] = self.accept(out, preps[k])
        return results

    def generate(self, preps: list[Prepared]) -> list[Decoded]:
        """Constrained decoding of the prepared incidents (one batch): every incident's decisions
        side by side, then every agent's texts side by side (:meth:`ConstrainedDecoder.decode_forked`);
        each answer is the JSON both parts' values make (:func:`~rrsi.hub.lm.template.answer_text`)."""
        prompts = [chat_prompt(self.tokenizer, p.text) for p in preps]
        forked = self.decoder.decode_forked(
            prompts, [p.segments for p in preps], lambda k, decisions: preps[k].text_programs(decisions.values)
        )
        outs = []
        for prep, (decisions, texts) in zip(preps, forked):
            values, logp = dict(decisions.values), dict(decisions.logp)
            for t in texts:
                values |= t.values
                logp |= t.logp
            tokens = decisions.tokens + sum(t.tokens for t in texts)
            outs.append(Decoded(answer_text(prep.views, values), values, logp, tokens))
        self.tokens += sum(o.tokens for o in outs)
        return outs

    def accept(self, out: Decoded, prep: Prepared) -> JointReflection | None:
        """The validated reflection of ``out``, or None (logged, counted) when it fails validation."""
        try:
            return parse_output(out.text, out.logp, prep, self.backend)
        except SchemaError as exc:
            self.rejected += 1
            log.warning("incident %s: LM reflection rejected, not applied: %s", prep.incident.incident_id, exc)
            return None
