"""How a job or its plan failed, as a driver sees it: plans, quality gates, job errors."""

from __future__ import annotations

from raytroupe.protocols.errors.base import ErrorCode, TroupeError

__all__ = [
    "JobCancelled",
    "JobError",
    "JobFailed",
    "JobNotFound",
    "JobTimeout",
    "PlanError",
    "QualityGateFailed",
]


class QualityGateFailed(TroupeError):
    """An output kept failing its JSON Schema or required fields after its retries."""

    code = ErrorCode.QUALITY_GATE


class PlanError(TroupeError):
    """A planner's output is not a valid plan (bad JSON, cycles, unknown roles)."""

    code = ErrorCode.PLAN


class JobError(TroupeError):
    """Base of job-level errors seen by drivers."""

    code = ErrorCode.JOB


class JobFailed(JobError):
    """The job ended without an answer; ``detail['result']`` holds the ``JobResult``."""

    code = ErrorCode.JOB_FAILED


class JobCancelled(JobFailed):
    """The job was cancelled before it finished; ``detail['result']`` holds what ran."""

    code = ErrorCode.CANCELLED


class JobTimeout(JobError):
    """The job did not finish within the time the caller was willing to wait."""

    code = ErrorCode.JOB_TIMEOUT
    retryable = True


class JobNotFound(JobError):
    """No job with that id is known to the orchestrator."""

    code = ErrorCode.JOB_NOT_FOUND
