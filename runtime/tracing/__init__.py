"""Traces of jobs: the spans agents and the orchestrator record, and their export.

``spans`` builds an agent's model- and tool-call spans; ``jobs`` collects a job's spans on the
orchestrator side; ``otel`` exports a finished job's spans to OpenTelemetry.
"""
