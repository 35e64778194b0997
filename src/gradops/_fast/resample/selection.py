"""The selection tables of the resample microkernels: which generated microkernel computes each
piece of a plan (package docstring; SPEC 3.4, 3.7).

* ``ROW_SUMS``: step 1, by rows added per pass (4, then 2, then 1: ``rows._sum_rows``) and whether
  the sum is weighted (False only when every weight is 1: nearest);
* ``SLOT_SUMS``: a vector of a four-slot NHWC pixel, weighted or not (``writers._store_slots4``,
  ``columns_first._combine4``); ``TERM_SUMS``: the weighted sum of four vectors in registers,
  which the generated ``slots4_weighted_vector`` and ``half_span_...`` call;
* ``SLOT_RUNS``: step 2 for NHWC pixels, by (into, slots, weighted): "store" the elements of a
  four-slot pixel past its whole vectors (``writers._store_slots4``), or "add" four slots or one
  to a pixel summed in memory first (``writers._store_units``: strided dst, more slots);
* ``SLOT_VECTOR_RUNS``: the whole vectors of a four-slot pixel, by (weighted, store): plain,
  non-temporal, non-temporal float16 (``writers._store_slots4``);
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

SLOT_RUNS = {
    ("store", 4, True): "store_slots4_weighted", ("store", 4, False): "store_slots4_plain",
    # A strided pixel's groups of four slots, then single slots (weights of 1 when nearest: exact).
    ("add", 4, True): "add_slots4_weighted", ("add", 4, False): "add_slots4_plain",
    ("add", 1, True): "add_slots1_weighted",
}

SLOT_VECTOR_RUNS = {
    (True, "store"): "slots4_weighted_store", (True, "stream"): "slots4_weighted_stream",
    (True, "stream_half"): "slots4_weighted_stream_half",
    (False, "store"): "slots4_plain_store", (False, "stream"): "slots4_plain_stream",
    (False, "stream_half"): "slots4_plain_stream_half",
}

HALF_SPANS = {4: "half_span_4v", 1: "half_span_1v"}


def row_sum_microkernel(name: str):
    """The generated row-sum microkernel ``name``."""
    return getattr(row_sum_microkernels, name)


def column_microkernel(name: str):
    """The generated column microkernel ``name``."""
    return getattr(column_microkernels, name)
