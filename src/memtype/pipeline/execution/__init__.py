"""How a run executes: groups on executors (inline, threads, dask), the runner of one group,
buffers, progress, early stop, the run record (resume), failures and the report."""
