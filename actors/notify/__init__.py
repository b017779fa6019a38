"""Webhooks: a tenant's endpoints told of its jobs' events.

See :mod:`raytroupe.protocols.webhooks` for what they are and what they send.
"""
