"""Pipeline: the stage functions in order, the build report, local and Ray executors, incremental
refresh, run history and the scheduler.
"""
