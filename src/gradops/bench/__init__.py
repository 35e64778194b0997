"""The benchmark harness behind ``gradops bench`` (suite S1 of benchmarks SUITE.md).

* :mod:`.suite`: the workloads, each defined once (shapes, dtype, layout, parameters, inputs).
* :mod:`.runners`: one module per contender (gradops and each peer framework) turning a workload
  into timed callables, in every layout that contender is fast at.
* :mod:`.worker`: one process per (contender, workload), printing JSON.
* :mod:`.measure`: timing, the correctness check, the machine's bandwidth and matmul rate.
* :mod:`.orchestrate` and :mod:`.report`: run the suite, build the tables, JSON and chart.

Importing this package imports no peer framework and no numba.
"""
