"""Graph jobs: shared typed state in supersteps, checkpoints, interrupts, resumes and forks.

- :mod:`.state`: the state's schema and reducers, node prompts, answers as updates;
- :mod:`.engine`: the superstep loop (fan-out, first-k joins, subgraphs);
- :mod:`.nodes`: an agent, team or skill node's run (updates sent back, child jobs);
- :mod:`.routing`: the edges: the next superstep's nodes, joins waiting, maps;
- :mod:`.checkpoints`: checkpoints, resumes, forks and child jobs in the journal's database;
- :mod:`.desk`: where paused graphs wait for people;
- :mod:`.control`: the orchestrator's graph methods.
"""
