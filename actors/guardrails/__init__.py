"""Guardrails: policies that check and redact a job's input, tool calls and output."""
