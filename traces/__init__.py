"""Trace formats in and out: Who&When logs, OpenTelemetry spans, the project's trace JSON."""
