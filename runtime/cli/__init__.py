"""The ``troupe`` command line: a local Ray with raytroupe and its HTTP app, jobs, keys.

```text
troupe up [--http-port 8000] [--num-cpus N] ...   start Ray on 127.0.0.1, the actors, the app
troupe down                                        stop what `up` started
troupe run TEAM TASK [--json]                      run a job, its subtasks shown live
troupe jobs | troupe agents                        tables of jobs and agents
troupe checkpoints JOB [--json]                    a graph job's checkpoints
troupe resume JOB [--value JSON] [--state JSON]    let a graph waiting for input go on
troupe fork JOB STEP [--state JSON]                a new job from a graph job's checkpoint
troupe serve [--port 8000] [--api-config FILE]     deploy the HTTP app onto a running Ray
troupe key new [--tenant T] [--admin]              a new API key and its hash
```

Exit status: 0 on success, 1 when something failed (a raytroupe error, printed as one red
line), 2 on a usage error (a missing or invalid file among them).
"""

from raytroupe.runtime.cli._app import app, main

__all__ = ["app", "main"]
