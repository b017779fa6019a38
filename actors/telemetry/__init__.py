"""What the actors report: metrics (through Ray's metrics agent) and the spans of jobs.

``metrics`` holds every counter, gauge and histogram, with bounded tag values; ``calls`` the
spans an agent records for its model and tool calls; ``jobs`` the spans the orchestrator
collects for a job; ``otel`` exports a finished job's spans to OpenTelemetry. It sits below
every actor (which all report) and imports none of them.
"""
