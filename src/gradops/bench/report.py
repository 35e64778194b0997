"""Summaries, tables and the chart of a suite run.

For each workload and output policy (``fresh``: outputs allocated by each call, as users call
the operators; ``out``: preallocated outputs, gradops ``out=`` and torch ``out=``), every
contender's cell is its fastest *correct* variant (layout named). A variant whose result failed
the check is flagged and never counts as the fastest peer. The lower bound is
``max(bytes_moved / bandwidth, flops / matmul_rate)`` with both rates measured in the same run.
"""

from __future__ import annotations

import math
from typing import Any

from .runners import GRADOPS, PEERS

OUTPUTS = {"fresh": "fresh outputs (as users call the operators)",
           "out": "preallocated outputs (out=; TF and JAX have none)"}


def lower_bound(bytes_moved: int, flops: int, machine: dict[str, Any]) -> float | None:
    if machine.get("status") != "ok":
        return None
    return max(bytes_moved / machine["bandwidth"]["bytes_per_s"], flops / machine["matmul"]["flops_per_s"])


def best_cell(result: dict[str, Any], output: str) -> dict[str, Any]:
    """A contender's cell for one output policy: its fastest correct variant, else its fastest
    wrong one (``status: wrong``), else why it has none."""
    if result.get("status") != "ok":
        return {"status": result.get("status", "error"), "reason": result.get("reason", "")}
    variants = [v for v in result["variants"] if v["output"] == output]
    if not variants:
        return {"status": "none", "reason": f"no {output} variant"}
    timed = [v for v in variants if v["status"] == "ok"]
    if not timed:
        return {"status": "n/a", "reason": "; ".join(sorted({v["reason"] for v in variants}))}
    correct = [v for v in timed if _verdict(v) in ("passed", "unchecked", "framework convention")]
    best = min(correct or timed, key=lambda v: v["median_s"])
    return {"status": "ok" if correct else "wrong", "median_s": best["median_s"], "min_s": best["min_s"],
            "layout": best["layout"], "check": _verdict(best)}


def _verdict(variant: dict[str, Any]) -> str:
    """``passed`` (matches the DirectML reference), ``framework convention`` (a peer that matches
    its own framework's documented convention instead, which differs at exact ties, SPEC 3.7),
    ``wrong`` or ``unchecked`` (no reference)."""
    check = variant.get("check")
    if check is None:
        return "unchecked"
    if check["passed"]:
        return "passed"
    return "framework convention" if check.get("framework_convention", {}).get("passed") else "wrong"


def summarise(entry: dict[str, Any], machine: dict[str, Any]) -> dict[str, Any]:
    bound = lower_bound(entry["bytes_moved"], entry["flops"], machine)
    summary: dict[str, Any] = {"lower_bound_s": bound}
    for output in OUTPUTS:
        gradops = best_cell(entry["results"][GRADOPS.name], output)
        peers = {name: best_cell(result, output) for name, result in entry["results"].items()
                 if name != GRADOPS.name}
        timed = {name: cell["median_s"] for name, cell in peers.items() if cell["status"] == "ok"}
        fastest = min(timed, key=timed.__getitem__) if timed else None
        ok = gradops["status"] == "ok"
        summary[output] = {
            "gradops": gradops, "peers": peers, "fastest_peer": fastest,
            "ratio_to_fastest_peer": gradops["median_s"] / timed[fastest] if ok and fastest else None,
            "ratio_to_lower_bound": gradops["median_s"] / bound if ok and bound else None,
        }
    return summary


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.3g}"


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _cell_text(cell: dict[str, Any]) -> str:
    """rich markup for one timing cell."""
    status = cell["status"]
    if status == "ok":
        mark = " [yellow]≈[/yellow]" if cell["check"] == "framework convention" else ""
        return f"{_ms(cell['median_s'])}{mark}\n[dim]{cell['layout']}[/dim]"
    if status == "wrong":
        return f"[red bold]WRONG[/red bold] {_ms(cell['median_s'])}\n[dim]{cell['layout']}[/dim]"
    if status == "none":
        return "[dim]-[/dim]"
    # Short reasons fit the cell; long ones (peer error messages) are listed under the tables.
    reason = cell.get("reason", "")
    return f"[yellow]{status}[/yellow]" + (f"\n[dim]{reason}[/dim]" if len(reason) <= 16 else "")


def tables(report: dict[str, Any]) -> list:
    """The two timing tables and the cold-call table, as rich renderables."""
    from rich.table import Table

    peers = [name for name, info in report["peers"].items() if info["selected"]]
    rendered = []
    for output, title in OUTPUTS.items():
        rounds = report.get("rounds", 1)
        best_of = f", fastest of {rounds} rounds" if rounds > 1 else ""
        table = Table(title=f"Suite {report['suite']}, {title}: median ms of {report['reps']} calls{best_of}, "
                      "2 threads",
                      show_lines=True)
        table.add_column("id", no_wrap=True)
        table.add_column("gradops\nmedian", justify="right")
        table.add_column("gradops\nmin", justify="right")
        for name in peers:
            table.add_column(PEERS[name].label, justify="right")
        table.add_column("gradops /\nfastest peer", justify="right")
        table.add_column("lower\nbound", justify="right")
        table.add_column("gradops /\nbound", justify="right")
        for entry in report["workloads"]:
            summary = entry["summary"][output]
            gradops, fastest = summary["gradops"], summary["fastest_peer"]
            versus = _ratio(summary["ratio_to_fastest_peer"])
            if fastest:
                versus += f"\n[dim]{PEERS[fastest].label}[/dim]"
            table.add_row(entry["id"], _cell_text(gradops), _ms(gradops.get("min_s")),
                          *(_cell_text(summary["peers"][name]) for name in peers), versus,
                          _ms(entry["summary"]["lower_bound_s"]), _ratio(summary["ratio_to_lower_bound"]))
        rendered.append(table)
    cold = Table(title="gradops first call in a new process (includes loading numba and its kernel cache, "
                 "or compiling)")
    for column in ("id", "operator", "cold first call ms", "warm median ms"):
        cold.add_column(column, justify="left" if column in ("id", "operator") else "right")
    for entry in report["workloads"]:
        result = entry["results"][GRADOPS.name]
        first = result.get("variants", [{}])[0] if result.get("status") == "ok" else {}
        cold.add_row(entry["id"], f"gradops.{entry['operator']}", _ms(first.get("cold_s")),
                     _ms(entry["summary"]["fresh"]["gradops"].get("median_s")))
    rendered.append(cold)
    return rendered


def markdown(report: dict[str, Any]) -> str:
    """The two timing tables as one Markdown table (for the README): per workload and output
    policy, gradops' median, the fastest peer's, their ratio and gradops over the lower bound."""
    lines = ["| id | fresh: gradops ms | fastest peer ms | ratio | out=: gradops ms | fastest peer ms | ratio "
             "| lower bound ms | out= / bound |", "|---|---:|---|---:|---:|---|---:|---:|---:|"]
    for entry in report["workloads"]:
        cells = [entry["id"]]
        for output in OUTPUTS:
            summary = entry["summary"][output]
            fastest = summary["fastest_peer"]
            peer = summary["peers"][fastest] if fastest else None
            cells += [_ms(summary["gradops"].get("median_s")),
                      f"{_ms(peer['median_s'])} {PEERS[fastest].label}" if peer else "-",
                      _ratio(summary["ratio_to_fastest_peer"])]
        cells += [_ms(entry["summary"]["lower_bound_s"]), _ratio(entry["summary"]["out"]["ratio_to_lower_bound"])]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def notes(report: dict[str, Any]) -> list[str]:
    """Plain-text lines: the machine figures, every n/a or skipped cell with its reason, every
    wrong answer with its error."""
    platform_info = report["platform"]
    tier = platform_info.get("tier", "native")
    lines = [f"CPU: {platform_info['processor']}, {tier} tier"
             + (f" (host: {platform_info['host_tier']})" if platform_info.get("host_tier", tier) != tier else "")]
    machine = report["machine"]
    if machine.get("status") == "ok":
        bandwidth, matmul = machine["bandwidth"], machine["matmul"]
        lines.append(f"lower bound = max(bytes / {bandwidth['bytes_per_s'] / 1e9:.1f} GB/s, FLOPs / "
                     f"{matmul['flops_per_s'] / 1e9:.1f} GFLOP/s): best 2-thread copy "
                     f"{bandwidth['copy_bytes_per_s'] / 1e9:.1f} / triad {bandwidth['triad_bytes_per_s'] / 1e9:.1f}"
                     f" GB/s, float32 matmul n={matmul['n']}")
    else:
        lines.append(f"machine measurement failed: {machine.get('reason')}")
    loads = [report["platform"].get(f"load_average_{when}") for when in ("start", "end")]
    if all(loads):
        lines.append(f"1-minute load average {loads[0][0]:.1f} at the start, {loads[1][0]:.1f} at the end, on "
                     f"{report['platform']['cpus']} CPUs (this run's workers account for up to 2)")
    for name, info in report["peers"].items():
        if info["selected"] and not info["installed"]:
            lines.append(f"{PEERS[name].label}: not installed, skipped")
    convention_notes = False
    for entry in report["workloads"]:
        if entry["reference"]["status"] != "ok":
            lines.append(f"{entry['id']}: no reference ({entry['reference'].get('reason')}), results unchecked")
        for name, result in entry["results"].items():
            label = PEERS[name].label if name in PEERS else name
            if result.get("status") not in ("ok", "skipped"):
                lines.append(f"{entry['id']} {label}: {result.get('status')} ({result.get('reason')})")
                continue
            by_verdict: dict[str, list[dict[str, Any]]] = {}
            for variant in result.get("variants", []):
                by_verdict.setdefault(_verdict(variant), []).append(variant)
                if variant["status"] != "ok":
                    lines.append(f"{entry['id']} {label} {variant['layout']} {variant['output']}: n/a "
                                 f"({variant['reason']})")
            for verdict, mark in (("wrong", "WRONG"), ("framework convention", "≈")):
                variants = by_verdict.get(verdict, [])
                if variants:
                    convention_notes |= verdict == "framework convention"
                    which = ", ".join(f"{v['layout']} {v['output']}" for v in variants)
                    lines.append(f"{entry['id']} {label}: {mark} ({which}): {_mismatch(variants[0]['check'])}")
    if convention_notes:
        lines.append("≈ differs from the DirectML reference but matches the framework's own nearest index "
                     "floor(x * fl32(in/out)) exactly (checked independently): at exact ties with an inexact "
                     "ratio it rounds the other way than DirectML's x / fl32(out/in) (SPEC 3.7); counted as correct")
    return lines


def _mismatch(check: dict[str, Any]) -> str:
    if "relative_error" not in check:
        return check.get("reason", "")
    return (f"{check['mismatched_elements']} of {check['elements']} elements off, max relative error "
            f"{check['relative_error']:.3g} > tolerance {check['tolerance']:g}")


def chart(report: dict[str, Any], path: str) -> None:
    """Bar chart of gradops / fastest peer per workload, both tables, with the 1.0 line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ids = [entry["id"] for entry in report["workloads"]]
    fig, ax = plt.subplots(figsize=(max(6.0, 0.6 * len(ids) + 2), 4.5))
    width = 0.4
    for k, (output, title) in enumerate(OUTPUTS.items()):
        ratios = [entry["summary"][output]["ratio_to_fastest_peer"] for entry in report["workloads"]]
        xs = [i + (k - 0.5) * width for i in range(len(ids))]
        ax.bar([x for x, r in zip(xs, ratios) if r is not None], [r for r in ratios if r is not None],
               width=width, label=title.split(" (")[0])
    ax.axhline(1.0, color="black", linewidth=1)
    ax.set_yscale("log")
    ax.set_xticks(range(len(ids)), ids)
    ax.set_ylabel("gradops time / fastest peer time (lower is better)")
    quick = " (quick shapes)" if report["quick"] else ""
    ax.set_title(f"Suite {report['suite']}{quick}, median of {report['reps']} calls, 2 threads")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def sweep_chart(report: dict[str, Any], path: str) -> None:
    """The size sweep: gradops / fastest peer against the output's size, one line per family and
    output policy, with the 1.0 line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .suite import SWEEP_FAMILIES

    fig, ax = plt.subplots(figsize=(8.0, 4.5))
    for family, name in SWEEP_FAMILIES.items():
        entries = [e for e in report["workloads"] if e["id"].startswith(family)]
        for output, style in (("fresh", "-"), ("out", ":")):
            points = [(math.prod(_result_shape(e)) * 4, e["summary"][output]["ratio_to_fastest_peer"])
                      for e in entries]
            points = [(x, r) for x, r in points if r is not None]
            if points:
                ax.plot(*zip(*points), style, marker="o", label=f"{name} ({output})")
    ax.axhline(1.0, color="black", linewidth=1)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("output bytes")
    ax.set_ylabel("gradops time / fastest peer time (lower is better)")
    ax.set_title(f"Size sweep, median of {report['reps']} calls, 2 threads, {report['platform']['processor']} "
                 f"({report['platform'].get('tier', 'native')})", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _result_shape(entry: dict[str, Any]) -> list[int]:
    return entry.get("shape") or entry.get("forward_input") or entry["input_sizes"]
