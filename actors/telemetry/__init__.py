"""What the actors report: metrics (through Ray's metrics agent) and the spans of jobs.

``metrics`` holds every counter, gauge and histogram, with bounded tag values (made by a
backend of ``metric_backends``: Ray's, or ``metric_capture``'s list in tests); ``calls`` the
spans an agent records for its model and tool calls; ``jobs`` the spans the orchestrator
collects for a job; ``tracing`` sets OpenTelemetry up in each actor process from the
``OTEL_*`` variables and carries trace context across actors; ``genai`` makes the live spans
of jobs, agents, model and tool calls. It sits below every actor (which all report) and
imports none of them.
"""
