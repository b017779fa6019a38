"""``python -m raytroupe.runtime.cli``: the ``troupe`` command."""

from raytroupe.runtime.cli import main

main()
