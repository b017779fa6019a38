"""Agent memory: a Chroma vector store behind an actor, with offline embedding functions.

``raytroupe.actors.memory.embeddings`` holds the embedding functions (MiniLM by default, feature
hashing for fast tests and as a fallback); Chroma's own default must never be used.
"""
