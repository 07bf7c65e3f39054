#!/usr/bin/env bash
# One prepared GPU check for the LM Reflector (H200 device machine, <= 8 minutes).
#
# Trains LoRA (bf16) and QLoRA (nf4, double quantization, bf16 compute) for a few steps on a
# SmolLM2-135M-shaped model (random weights: the device has no model files) and measures
# generation tokens/s at batch 1, 64 and 256 for plain eager `generate` (dynamic cache)
# and for the static-KV-cache path transformers compiles (torch.compile; CUDA graphs with
# mode "reduce-overhead"), and for the project's own constrained decoder (LMReflector, the
# path the hub runs: synthetic incidents of the bundled scenario, the real SmolLM2 tokenizer),
# all in the same run, and the root-cause writer's seconds per finding of a text incident. Needs torch, transformers and peft (preinstalled there); installs the
# carried wheels from out/wheels (bitsandbytes; rrsi and its small pure dependencies for the
# project path, which is recorded as an error, not fatal, if they do not import); does not need ray.
#
#   # here, once (out/ is git-ignored: pass carry=["out/wheels", "out/tokenizer"] to the device)
#   pip download bitsandbytes==0.50.2 --no-deps -d out/wheels
#   pip wheel --no-deps -w out/wheels .
#   pip download --no-deps --only-binary=:all: --python-version 3.12 -d out/wheels \
#       pydantic==2.14.* pydantic-core annotated-types typing-inspection networkx
#   cp ~/.rrsi/models/smollm2-135m/tokenizer* ~/.rrsi/models/smollm2-135m/special_tokens_map.json out/tokenizer/
#   bash bench/gpu_check.sh            # on the device; results in $OUT/gpu_check.json
#   bash bench/gpu_check.sh --cpu-smoke  # tiny model on CPU, checks the script's logic here
set -euo pipefail
OUT="${OUT:-out/gpu_check}"
mkdir -p "$OUT"
SMOKE=0
[[ "${1:-}" == "--cpu-smoke" ]] && SMOKE=1
if [[ $SMOKE == 0 ]]; then
  python -m pip install --no-deps --quiet out/wheels/*.whl 2>&1 | tail -2 || true
  nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv | tee "$OUT/nvidia_smi.txt"
fi
PY="${PYTHON:-python}"
SMOKE=$SMOKE OUT=$OUT "$PY" - <<'EOF'
import json, os, time, traceback
import torch
from transformers import LlamaConfig, LlamaForCausalLM

smoke = os.environ["SMOKE"] == "1"
out = os.environ["OUT"]
dev = "cpu" if smoke else "cuda"
dtype = torch.float32 if smoke else torch.bfloat16
shape = dict(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9, num_key_value_heads=3,
             vocab_size=49152, max_position_embeddings=8192, rope_theta=100000.0, tie_word_embeddings=True)
if smoke:  # tiny, but with SmolLM2's vocabulary so the project path can use its tokenizer
    shape.update(num_hidden_layers=2, hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2)
config = LlamaConfig(**shape, pad_token_id=2, bos_token_id=1, eos_token_id=2)
results = {"device": torch.cuda.get_device_name(0) if dev == "cuda" else "cpu", "torch": torch.__version__}
import transformers, peft
results["transformers"], results["peft"] = transformers.__version__, peft.__version__
PROMPT, NEW = (32, 16) if smoke else (128, 64)
BATCHES = [1, 2] if smoke else [1, 64, 256]
torch.manual_seed(0)

def sync():
    if dev == "cuda":
        torch.cuda.synchronize()

def save():
    with open(os.path.join(out, "gpu_check.json"), "w") as f:
        json.dump(results, f, indent=2)

def train(qlora: bool, steps: int = 3 if smoke else 20, batch: int = 2 if smoke else 8, length: int = 32 if smoke else 256):
    from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training
    if qlora:
        from transformers import BitsAndBytesConfig
        import tempfile
        tmp = tempfile.mkdtemp()
        LlamaForCausalLM(config).to(dtype).save_pretrained(tmp)
        q = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                               bnb_4bit_compute_dtype=torch.bfloat16)
        model = LlamaForCausalLM.from_pretrained(tmp, quantization_config=q, device_map={"": dev})
        model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=False)
    else:
        model = LlamaForCausalLM(config).to(dev, dtype)
    model = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, lora_dropout=0.1, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM"))
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=2e-3)
    ids = torch.randint(0, config.vocab_size, (batch, length), device=dev)
    losses, times = [], []
    for _ in range(steps):
        t = time.perf_counter()
        loss = model(input_ids=ids, labels=ids).loss
        opt.zero_grad(); loss.backward(); opt.step(); sync()
        times.append(time.perf_counter() - t); losses.append(loss.item())
    return {"steps": steps, "batch": batch, "length": length, "loss_first": losses[0], "loss_last": losses[-1],
            "s_per_step_median": sorted(times)[len(times) // 2]}

def gen_rate(model, batch: int, **kw) -> float:
    ids = torch.randint(3, config.vocab_size, (batch, PROMPT), device=dev)
    attn = torch.ones_like(ids)
    args = dict(max_new_tokens=NEW, min_new_tokens=NEW, do_sample=False, pad_token_id=2, **kw)
    model.generate(input_ids=ids, attention_mask=attn, **args)  # warm-up (compiles the static path)
    sync(); t = time.perf_counter()
    model.generate(input_ids=ids, attention_mask=attn, **args)
    sync()
    return batch * NEW / (time.perf_counter() - t)

for name, fn in [("lora", lambda: train(False)), ("qlora", lambda: train(True))]:
    if name == "qlora" and smoke:
        results[name] = "skipped on CPU smoke (bitsandbytes CPU path is covered by the CPU test suite)"
        continue
    try:
        results[name] = fn()
    except Exception as exc:
        results[name] = {"error": repr(exc), "trace": traceback.format_exc()[-800:]}
    save(); print(name, results[name], flush=True)

model = LlamaForCausalLM(config).to(dev, dtype).eval()
paths = {"eager": {}, "static_compiled": {"cache_implementation": "static"}}
if not smoke:
    from transformers import CompileConfig
    paths["static_cudagraphs"] = {"cache_implementation": "static", "compile_config": CompileConfig(mode="reduce-overhead")}
results["generate_tokens_per_s"] = {}
for batch in BATCHES:
    row = {}
    for name, kw in paths.items():
        try:
            row[name] = gen_rate(model, batch, **kw)
        except Exception as exc:
            row[name] = {"error": repr(exc)[:300]}
    if isinstance(row.get("eager"), float):
        row["speedup"] = {k: v / row["eager"] for k, v in row.items() if k != "eager" and isinstance(v, float)}
    results["generate_tokens_per_s"][batch] = row
    save(); print(batch, row, flush=True)

def project_decode() -> dict:
    """tokens/s of LMReflector.reflect_batch on the same random-weight model (outputs stay valid: constrained)."""
    from transformers import AutoTokenizer
    from rrsi.scenario import bundled_scenario
    from rrsi.lab.first_use import scenario_registry
    from rrsi.lab.reflector_data import synthetic_examples
    from rrsi.hub.lm.lm_reflector import LMReflector
    tok_dir = os.environ.get("RRSI_TOKENIZER", "out/tokenizer")
    if not os.path.isdir(tok_dir):
        from rrsi.hub.lm.base import base_model_dir
        tok_dir = str(base_model_dir())
    tok = AutoTokenizer.from_pretrained(tok_dir)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    scenario = bundled_scenario()
    registry = scenario_registry(scenario)
    incidents = [e.incident for e in synthetic_examples(scenario, max(BATCHES), seed=2024)]
    rows = {}
    for batch in BATCHES:
        refl = LMReflector(registry, model=model, tokenizer=tok, device=dev, batch_size=batch)
        refl.reflect_batch(incidents[:1])  # warm-up
        before = refl.tokens
        sync(); t = time.perf_counter()
        outs = refl.reflect_batch(incidents[:batch])
        sync(); secs = time.perf_counter() - t
        rows[batch] = {"tokens_per_s": (refl.tokens - before) / secs, "reflections_per_s": batch / secs,
                       "valid": sum(o is not None for o in outs), "of": batch}
        eager = results["generate_tokens_per_s"][batch].get("eager")
        if isinstance(eager, float):
            rows[batch]["vs_eager_generate"] = rows[batch]["tokens_per_s"] / eager
        print("project", batch, rows[batch], flush=True)
    return rows

try:
    results["project_decode_tokens_per_s"] = project_decode()
except Exception as exc:
    results["project_decode_tokens_per_s"] = {"error": repr(exc)[:300], "trace": traceback.format_exc()[-800:]}
save()

def reason_writer_latency() -> dict:
    """Seconds per finding of the root-cause writer (ReasonWriter.write, batch 1, greedy, up to its 40 new
    tokens: random weights rarely stop early, so this is the worst case) on the same model and tokenizer."""
    from transformers import AutoTokenizer
    from rrsi.hub.lm.reason_writer import ReasonItem, ReasonSettings, ReasonWriter
    tok_dir = os.environ.get("RRSI_TOKENIZER", "out/tokenizer")
    if not os.path.isdir(tok_dir):
        from rrsi.hub.lm.base import base_model_dir
        tok_dir = str(base_model_dir())
    writer = ReasonWriter(model.eval(), AutoTokenizer.from_pretrained(tok_dir), ReasonSettings())
    item = ReasonItem(task="How many even numbers are in the list? " * 12, agent="Coder_Expert",
                      words="```python\nprint(len([2, 4]))\n```\nThe count is 2, as the code shows. " * 15)
    writer.write([item])  # warm-up
    secs = []
    for _ in range(3 if smoke else 10):
        sync(); t = time.perf_counter(); writer.write([item]); sync(); secs.append(time.perf_counter() - t)
    secs.sort()
    return {"p50_s": secs[len(secs) // 2], "max_s": secs[-1], "prompt_tokens": len(writer.prompt_ids(item))}

try:
    results["reason_writer"] = reason_writer_latency()
except Exception as exc:
    results["reason_writer"] = {"error": repr(exc)[:300], "trace": traceback.format_exc()[-800:]}
save()
print(json.dumps(results, indent=2))
EOF
