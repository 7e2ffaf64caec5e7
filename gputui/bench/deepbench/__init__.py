"""DeepBench's problem lists (baidu-research/DeepBench, `code/kernels/*_problems.h`) as data,
the shapes the `deepbench` benchmark picks from them, and how it counts their FLOPs.

Torch-free: the parent (catalog, views) and the worker both read it. `problems` holds the
typed problems and the selection; the `*_lists` modules hold DeepBench's rows as it wrote
them.
"""
