"""The ``troupe`` command line: a local Ray with raytroupe and its HTTP app, or a deployment.

```text
troupe up [--http-port 8000] [--num-cpus N] ...   start Ray on 127.0.0.1, the actors, the app
troupe down                                        stop what `up` started
troupe run TEAM TASK [--json] [--detach]           run a job, its subtasks shown live
troupe result JOB [--json] [--no-wait]             a job's result
troupe events JOB [--follow] [--json]              a job's events, as they happen
troupe cancel JOB                                  cancel a job
troupe jobs | agents | usage [--daily]             tables of jobs, agents, model usage
troupe approvals [JOB]                             tool calls waiting for a person
troupe approve JOB APPROVAL | reject ... --reason  decide a held call
troupe teams list|show|apply FILE|delete NAME      registered teams
troupe dead-letters                                what the router could not deliver (admins)
troupe checkpoints JOB [--json]                    a graph job's checkpoints
troupe resume JOB [--value JSON] [--state JSON]    let a graph waiting for input go on
troupe fork JOB STEP [--state JSON]                a new job from a graph job's checkpoint
troupe serve [--port 8000] [--api-config FILE]     deploy the HTTP app onto a running Ray
troupe key new [--tenant T] [--admin]              a new API key and its hash
```

Where a command runs: with ``--url`` (``$TROUPE_URL``) and ``--key`` (``$TROUPE_API_KEY``),
or ``--profile NAME`` (``~/.config/troupe/profiles.toml``), on that deployment over HTTP;
otherwise on this machine's Ray (``--address``, the Ray `troupe up` started, ``$RAY_ADDRESS``).
See :mod:`raytroupe.runtime.cli._remote`. ``troupe --install-completion`` adds shell completion.

Exit status: 0 on success, 1 when something failed (a raytroupe error, printed as one red
line), 2 on a usage error (a missing or invalid file among them).

``--help``, ``--version`` and completion import typer and rich only, never Ray or pydantic:
every command imports what it needs in its body.
"""

from raytroupe.runtime.cli._app import app, main

__all__ = ["app", "main"]
