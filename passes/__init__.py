"""Tessera's passes, one module per phase of the pipeline."""
