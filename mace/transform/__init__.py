"""Graph transformer: an ordered list of named passes over a Graph (see pipeline.py)."""
