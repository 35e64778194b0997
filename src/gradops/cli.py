"""The ``gradops`` command line: ``examples``, ``run FILE.json``, ``ops`` and the commands of
:data:`COMMANDS` (each a module with ``add_arguments(parser)`` and ``main(args) -> int``).

Every failure (bad JSON, a bad descriptor, a missing file, and anything unexpected) prints one
line starting with ``gradops: error:`` and exits with status 2, never a traceback
(``GRADOPS_TRACEBACK=1`` shows it for an unexpected error). Ctrl-C exits with status 130.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import os
import sys
import tempfile
from pathlib import Path
from typing import Sequence

import numpy as np

from .errors import GradopsError

# Subcommands that live in their own modules (imported only when used).
COMMANDS: dict[str, tuple[str, str]] = {
    "bench": ("gradops.bench.cli", "benchmark suites S1, S2 and the size sweep against PyTorch, TensorFlow and JAX"),
    "vectors": ("gradops.conformance.cli_vectors", "export or replay the conformance test-vector corpus"),
    "check": ("gradops.conformance.cli_check", "compare gradops live with TensorFlow, PyTorch, JAX and ONNX"),
    "warmup": ("gradops.warmup", "compile the fast kernels ahead, into the disk cache, in parallel processes"),
}


def _console():
    from rich.console import Console

    # Piped output (CI logs, files) gets a wide fixed width so tables do not wrap.
    return Console(highlight=False, width=None if sys.stdout.isatty() else 160)


def _plain(text: object) -> str:
    """Data printed through rich: brackets are data, not markup."""
    from rich.markup import escape

    return escape(str(text))


def _fmt(array: np.ndarray) -> str:
    return np.array2string(np.asarray(array), precision=8, separator=", ", max_line_width=100,
                           threshold=64, floatmode="maxprec")


def cmd_examples(args: argparse.Namespace) -> int:
    from .examples import all_examples, run_examples

    console = _console()
    failures = total = 0
    examples = [example for example in all_examples() if not args.only or example.id in args.only]
    checks = run_examples(examples, args.backend, initializer=_show_compiles)
    for example in examples:
        console.print(f"\n[bold]{example.id}[/bold]  {example.title}")
        for name, value in example.inputs.items():
            console.print(f"  {name} = {_plain(value)}")
        for check in checks[example.id]:
            total += 1
            failures += not check.passed
            mark = "[green]match[/green]" if check.passed else "[red bold]MISMATCH[/red bold]"
            rule = "exact" if check.rtol == 0 else f"rtol {check.rtol:g}"
            console.print(f"  {check.label}: {mark} ({rule})")
            console.print(f"    result   {_plain(_fmt(check.result))}")
            if not check.passed:
                console.print(f"    expected {_plain(_fmt(check.expected))}")
    console.print(f"\n{total - failures} of {total} checks match the SPEC section 7 numbers.")
    return 1 if failures else 0


def cmd_run(args: argparse.Namespace) -> int:
    from .registry import find_op, read_json

    path = Path(args.file)
    spec = read_json(path)
    if not isinstance(spec, dict):
        raise GradopsError(str(path), f"expected a JSON object, got {type(spec).__name__}")
    op = find_op(spec.get("operator"))
    out_path = Path(args.output) if args.output else path.with_suffix(".out.npz")
    out_field = "--output" if args.output else "output"
    if not out_path.parent.is_dir():  # before anything runs (and compiles), not after
        raise GradopsError(out_field, f"cannot write {out_path}: the folder {out_path.parent} does not exist")
    outputs = op.run_json(spec, path.parent)
    # .npy has no bfloat16 (ml_dtypes) type: such outputs are stored widened to float32, exactly.
    stored = {name: array.astype(np.float32) if array.dtype.name == "bfloat16" else array
              for name, array in outputs.items()}
    _write_npz(out_path, out_field, stored)
    console = _console()
    console.print(f"{op.name}: ran gradops.{op.function}")
    for name, array in outputs.items():
        widened = " (stored as float32, exact)" if stored[name].dtype != array.dtype else ""
        console.print(f"  {name}: shape {list(array.shape)} {array.dtype}{widened}")
        console.print(f"    {_plain(_fmt(array))}")
    console.print(f"wrote {out_path}")
    return 0


def _write_npz(path: Path, field: str, arrays: dict[str, np.ndarray]) -> None:
    """Write ``arrays`` to ``path`` whole or not at all: into a temporary file in the same folder,
    renamed over ``path`` once complete."""
    folder = path.parent
    if not folder.is_dir():
        raise GradopsError(field, f"cannot write {path}: the folder {folder} does not exist")
    try:
        handle, temporary = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise GradopsError(field, f"cannot write {path}: {exc.strerror}") from exc
    try:
        with os.fdopen(handle, "wb") as file:
            np.savez(file, **arrays)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)  # mkstemp's file is private; the output is an ordinary file
        os.replace(temporary, path)
    except OSError as exc:
        raise GradopsError(field, f"cannot write {path}: {exc.strerror or exc}") from exc
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


def cmd_ops(args: argparse.Namespace) -> int:
    from rich.table import Table

    from .registry import all_ops

    table = Table(title="gradops operators")
    for column in ("operator", "API", "gradops function", "ranks", "data types", "feature level"):
        table.add_column(column, no_wrap=column != "data types")
    for op in all_ops():
        table.add_row(op.name, op.api, f"gradops.{op.function}", op.ranks, ", ".join(op.dtypes),
                      op.feature_level or "-")
    _console().print(table)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gradops", description="Exact, fast backward-pass operators "
                                     "of DirectML and TensorFlow, in NumPy.")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("examples", help="run the SPEC section 7 worked examples and compare")
    p.add_argument("--only", nargs="*", metavar="EID", help="only these examples (e.g. E11 E17)")
    p.add_argument("--backend", choices=("auto", "fast", "reference"), default=None)
    p.set_defaults(func=cmd_examples)
    p = sub.add_parser("run", help="run one operator described in a JSON file")
    p.add_argument("file", help="JSON file (see gradops.registry for the format)")
    p.add_argument("-o", "--output", help="where to write the outputs (.npz); default FILE.out.npz")
    p.set_defaults(func=cmd_run)
    p = sub.add_parser("ops", help="list the operators, ranks, data types and feature levels")
    p.set_defaults(func=cmd_ops)
    for name, (module, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text)
        p.set_defaults(module=module)
        importlib.import_module(module).add_arguments(p)
    return parser


@contextlib.contextmanager
def _compile_progress():
    """A first call that compiles kernels logs one line per kernel (logger ``gradops``, INFO; see
    gradops._fast): the command shows them on stderr, so a cold start does not look like a hang."""
    logger = logging.getLogger("gradops")
    level = logger.level
    handler = _show_compiles()
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def _show_compiles() -> logging.Handler:
    """Shows the ``gradops`` logger's INFO lines on stderr (in this process: the command's, or a
    worker's of ``gradops examples``); returns the handler."""
    logger = logging.getLogger("gradops")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("gradops: %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    return handler


def _fail(message: str) -> int:
    print(f"gradops: error: {' '.join(message.split())}", file=sys.stderr)  # one line
    return 2


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        with _compile_progress():
            if hasattr(args, "func"):
                return args.func(args)
            return importlib.import_module(args.module).main(args)
    except GradopsError as exc:
        return _fail(str(exc))
    except KeyboardInterrupt:
        print("gradops: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - the CLI's promise: one line, never a traceback
        if os.environ.get("GRADOPS_TRACEBACK"):
            raise
        return _fail(f"unexpected {type(exc).__name__}: {exc} (GRADOPS_TRACEBACK=1 shows where)")


if __name__ == "__main__":
    sys.exit(main())
