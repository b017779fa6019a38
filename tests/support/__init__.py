"""Test-only helpers shared by integration tests and benchmarks (not part of the product)."""
