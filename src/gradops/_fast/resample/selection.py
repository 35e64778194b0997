"""The selection tables of the resample microkernels: which generated microkernel computes each
piece of a plan (package docstring; SPEC 3.4, 3.7).

* ``ROW_SUMS``: step 1, by rows added per pass (4, then 2, then 1: ``rows._sum_rows``) and whether
  the sum is weighted (False only when every weight is 1: nearest);
* ``SLOT_SUMS``: a vector of a four-slot NHWC pixel, weighted or not (``writers._store_slots4``,
  ``columns_first._combine4``); ``TERM_SUMS``: the weighted sum of four vectors in registers,
  which the generated ``slots4_weighted_vector`` and ``half_span_...`` call;
* ``SLOT_RUNS``: step 2 for NHWC pixels summed in memory first (``writers._store_units``: strided
  dst, more slots), by (slots, weighted): a group of four slots, then single ones;
* ``HALF_SPANS``: the columns-first affine span, by vectors of channels per pass, 4 then 1
  (``columns_first._half_column_sums``).

The names are those of ``row_sum_template.FAMILY`` and ``column_template.FAMILY``. Every entry
is looked up when the modules that call it are imported, but a kernel compiles only the
microkernels on the branches its plan keeps (``kernels._contract_kernel``); within a branch the
choice is made at run time where the plan does not fix it (rows per pass, weighted), as it was
before these families were generated. There is one tier: plain loops and ``simd`` vectors of
64 bytes, whatever the CPU.
"""

from __future__ import annotations

from . import column_microkernels, row_sum_microkernels

ROW_SUMS = {
    (4, True): "add_rows4_weighted", (4, False): "add_rows4_plain",
    (2, True): "add_rows2_weighted", (2, False): "add_rows2_plain",
    (1, True): "add_rows1_weighted", (1, False): "add_rows1_plain",
}

SLOT_SUMS = {True: "slots4_weighted_vector", False: "slots4_plain_vector"}

TERM_SUMS = "terms4_weighted_vector"

# Single slots are weighted even for nearest (weights of 1: exact).
SLOT_RUNS = {(4, True): "add_slots4_weighted", (4, False): "add_slots4_plain", (1, True): "add_slots1_weighted"}

HALF_SPANS = {4: "half_span_4v", 1: "half_span_1v"}


def row_sum_microkernel(name: str):
    """The generated row-sum microkernel ``name``."""
    return getattr(row_sum_microkernels, name)


def column_microkernel(name: str):
    """The generated column microkernel ``name``."""
    return getattr(column_microkernels, name)
