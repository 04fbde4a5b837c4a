"""campaign: run an ML compute campaign as one reproducible, resumable Snakemake DAG."""

__version__ = "0.1.0"
