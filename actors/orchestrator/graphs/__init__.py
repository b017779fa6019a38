"""Graph jobs: shared typed state in supersteps, checkpoints, interrupts, resumes and forks.

- :mod:`.state`: the state's schema and reducers, node prompts, answers as updates;
- :mod:`.engine`: the superstep loop (edges, fan-out, joins, maps, subgraphs, child jobs);
- :mod:`.checkpoints`: checkpoints, resumes, forks and child jobs in the journal's database;
- :mod:`.desk`: where paused graphs wait for people;
- :mod:`.control`: the orchestrator's graph methods.
"""
