"""One module per transformer pass; the order lives in mace/transform/pipeline.py."""
