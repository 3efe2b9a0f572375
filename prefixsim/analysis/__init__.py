"""Analyses over traces and replays: reference bounds (unbounded, belady), capacity curves
(exact LRU stack distances, sampled curves, replays) and trace characterisation. Pure
functions over requests; they write nothing and draw nothing (report/ draws). See
docs/architecture.md.
"""
