"""A pipeline of real agents — retrieve, read (SmolLM2 through transformers), verify — instrumented
with OpenTelemetry, pulling its params from the hub, its answers checked by code.

See ``examples/real_pipeline/README.md`` and ``bench/real_pipeline.py``.
"""
