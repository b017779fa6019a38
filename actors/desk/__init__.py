"""The front desk: admission, and the catalogs, policies, skills, sessions and evals it keeps."""

from raytroupe.actors.desk.actor import FrontDesk

__all__ = ["FrontDesk"]
