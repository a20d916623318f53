"""The simulator: replay a workload through a policy in virtual time, on the real controller, and measure it.

``workloads`` turns a trace or a generator into jobs; ``engine`` drives the controller, store and sim executor;
``baselines`` are the policies Shoal is compared with; ``metrics`` and ``report`` turn a run into figures.
"""
