"""``csm``: run streams from files, generate data, run the demo.

Thin by design: parse arguments, call library functions, print. Bad input exits 2 with
a message naming the file and line.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

import click

from gpu import CountMode, CsmError, ExecutorOptions

from .run import RunConfig, RunReport, run_files

__all__ = ["main"]


def _fail(message: str) -> None:
    click.echo(f"csm: error: {message}", err=True)
    sys.exit(2)


@contextlib.contextmanager
def _errors() -> Iterator[None]:
    try:
        yield
    except CsmError as exc:
        _fail(str(exc))
    except ValueError as exc:
        _fail(str(exc))


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """Exact continuous subgraph matching."""


def _summary(r: RunReport) -> str:
    lines = [
        f"backend: {r.backend}    counting: {r.mode}",
        f"graph: {r.graph_vertices:,} vertices, {r.graph_edges:,} edges "
        f"(loaded in {r.load_seconds:.2f} s)",
    ]
    for q in r.queries:
        lines.append(f"query {q.id} ({q.source}): {q.vertices} vertices, {q.edges} edges, "
                     f"|Aut|={q.automorphisms}: +{q.positive:,} / -{q.negative:,}")
    lines += [
        f"updates: {r.updates:,} ({r.applied:,} applied, {r.ignored:,} ignored, "
        f"{r.rejected:,} rejected)",
        f"matches: +{r.positive:,} / -{r.negative:,}",
        f"time: {r.seconds:.3f} s ({r.updates_per_second:,.0f} updates/s)",
    ]
    if r.deltas_written:
        lines.append(f"deltas written: {r.deltas_written:,}")
    return "\n".join(lines)


def _execute(graph: str, queries: tuple[str, ...], stream: str, fmt: str, cfg: RunConfig,
             deltas: str | None, as_json: bool) -> None:
    with _errors(), contextlib.ExitStack() as stack:
        bars: list[Any] = []

        def on_stream(n: int) -> None:
            """Show a bar on long runs, once the stream's length is known."""
            if sys.stderr.isatty() and n > cfg.batch_size:
                bars.append(stack.enter_context(
                    click.progressbar(length=n, label="matching", file=sys.stderr)))

        def progress(k: int) -> None:
            for bar in bars:
                bar.update(k)

        out: TextIO | None = None
        if deltas:
            out = stack.enter_context(open(deltas, "w", encoding="utf-8"))  # noqa: SIM115
        report = run_files(graph, queries, stream, fmt, cfg, out, progress, on_stream)
    if as_json:
        click.echo(json.dumps(report.as_dict()))
    else:
        click.echo(_summary(report))


_COUNT = click.Choice([m.value for m in CountMode])
_BACKEND = click.Choice(["auto", "cpu", "gpu"])


@main.command()
@click.option("--graph", "graph", required=True, help="Initial graph file.")
@click.option("--query", "queries", required=True, multiple=True,
              help="Query file (CSM format); repeat for several standing queries.")
@click.option("--stream", required=True, help="Update stream file.")
@click.option("--format", "fmt", type=click.Choice(["csm", "snap", "ar"]), default="csm",
              show_default=True, help="Format of the graph and stream files.")
@click.option("--count", type=_COUNT, default="subgraphs", show_default=True)
@click.option("--backend", type=_BACKEND, default="auto", show_default=True)
@click.option("--batch-size", type=click.IntRange(1), default=1024, show_default=True)
@click.option("--deltas", type=click.Path(dir_okay=False), help="Write deltas as JSON lines.")
@click.option("--list-matches", is_flag=True, help="Include match tuples in --deltas.")
@click.option("--max-matches", type=click.IntRange(0), default=1000, show_default=True,
              help="Listed tuples per update and query (counts stay exact).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
@click.option("--graph-budget", type=click.IntRange(0), default=0, show_default=True,
              help="GPU: device bytes for neighbour arrays; a bigger graph stays in host "
                   "memory (out-of-core). 0: no limit.")
@click.option("--cache", type=click.Choice(["walk", "degree", "none"]), default="walk",
              show_default=True, help="GPU out-of-core cache policy.")
@click.option("--device-graph", is_flag=True,
              help="GPU: the device owns the graph and resolves updates itself (stage 1 of "
                   "the device pipeline, docs/design.md; not with --graph-budget).")
def run(graph: str, queries: tuple[str, ...], stream: str, fmt: str, count: str, backend: str,
        batch_size: int, deltas: str | None, list_matches: bool, max_matches: int,
        as_json: bool, graph_budget: int, cache: str, device_graph: bool) -> None:
    """Load GRAPH, register the queries, apply the stream, report the deltas."""
    cfg = RunConfig(backend=backend, mode=CountMode(count), batch_size=batch_size,
                    list_matches=list_matches, max_matches=max_matches,
                    executor=ExecutorOptions(graph_budget_bytes=graph_budget, cache=cache,
                                             device_graph=device_graph))
    _execute(graph, queries, stream, fmt, cfg, deltas, as_json)


def _gen_options(f):  # type: ignore[no-untyped-def]
    for opt in reversed([
        click.option("--vertices", type=click.IntRange(2), default=20_000, show_default=True),
        click.option("--edges", type=click.IntRange(1), default=100_000, show_default=True),
        click.option("--labels", type=click.IntRange(1), default=16, show_default=True),
        click.option("--queries", "n_queries", type=click.IntRange(0), default=6,
                     show_default=True),
        click.option("--insert-ratio", type=click.FloatRange(0, 1), default=0.1,
                     show_default=True),
        click.option("--delete-ratio", type=click.FloatRange(0, 1), default=0.02,
                     show_default=True),
        click.option("--seed", type=int, default=7, show_default=True),
    ]):
        f = opt(f)
    return f


def _gen(out: Path, vertices: int, edges: int, labels: int, n_queries: int,
         insert_ratio: float, delete_ratio: float, seed: int) -> dict[str, Path]:
    from streams import GenConfig, generate, write_dataset
    with _errors():
        cfg = GenConfig(vertices=vertices, edges=edges, labels=labels, queries=n_queries,
                        insert_ratio=insert_ratio, delete_ratio=delete_ratio, seed=seed)
        return write_dataset(generate(cfg), out)
    raise AssertionError  # pragma: no cover


@main.command()
@click.option("--out", required=True, type=click.Path(file_okay=False), help="Output folder.")
@_gen_options
def gen(out: str, **kw: int | float) -> None:
    """Write a generated power-law graph, queries and stream in the CSM format."""
    paths = _gen(Path(out), **kw)  # type: ignore[arg-type]
    for name, p in paths.items():
        click.echo(f"{name}: {p}")


@main.command()
@click.option("--backend", type=_BACKEND, default="auto", show_default=True)
@click.option("--batch-size", type=click.IntRange(1), default=100, show_default=True,
              help="Updates per POST /v1/updates.")
@click.option("--rate", type=click.FloatRange(0), default=1000, show_default=True,
              help="Updates per second posted (0: as fast as possible).")
@click.option("--show", type=click.IntRange(0), default=10, show_default=True,
              help="Deltas to print.")
@click.option("--url", help="Drive this running service instead of starting one "
              "(its graph is loaded unless it has one already).")
@click.option("--token", envvar="CSM_API_TOKEN", help="Bearer token for --url.")
@click.option("--loop", is_flag=True, help="Keep posting new streams until stopped.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON summary on stdout.")
@_gen_options
def demo(backend: str, batch_size: int, rate: float, show: int, url: str | None,
         token: str | None, loop: bool, as_json: bool, **kw: int | float) -> None:
    """Run the service on an embedded broker (or drive one at --url), load a generated
    graph, register queries, stream updates over REST and print the deltas read back
    from Kafka."""
    from streams import GenConfig
    from streams.broker import free_port

    from .client import CsmClient
    from .demo import drive, run_demo
    from .serve import configure_logging
    from .settings import Settings
    configure_logging("warning")
    echo = lambda s: click.echo(s, err=as_json)  # noqa: E731
    with _errors():
        gen = GenConfig(vertices=kw["vertices"], edges=kw["edges"], labels=kw["labels"],  # type: ignore[arg-type]
                        queries=kw["n_queries"], insert_ratio=kw["insert_ratio"],  # type: ignore[arg-type]
                        delete_ratio=kw["delete_ratio"], seed=kw["seed"])  # type: ignore[arg-type]
        show = 0 if as_json else show
        if url:
            with CsmClient(url, token=token) as c:
                report = drive(c, gen, Settings().topic_matches, batch_size, rate, show, echo,
                               rounds=None if loop else 1)
        else:
            settings = Settings(backend=backend, port=free_port(), kafka_bootstrap=None,
                                ephemeral=True, log_level="warning")
            report = run_demo(gen, settings, batch_size, rate, show, echo)
    if as_json:
        click.echo(json.dumps(report.as_dict()))
        return
    click.echo(f"updates: {report.updates:,} in {report.seconds:.2f} s "
               f"({report.updates / max(report.seconds, 1e-9):,.0f}/s) over REST")
    click.echo(f"deltas: {report.deltas:,} on the matches topic "
               f"(+{report.positive:,} / -{report.negative:,} matches)")
    click.echo(f"response time (arrival to publish): p50 {report.latency_p50_ms:.1f} ms, "
               f"p99 {report.latency_p99_ms:.1f} ms")


@main.command()
@click.option("--host", help="Address to listen on (CSM_HOST, default 127.0.0.1).")
@click.option("--port", type=click.IntRange(0, 65535), help="Port (CSM_PORT, default 8000).")
@click.option("--backend", type=_BACKEND, help="Matching backend (CSM_BACKEND, default auto).")
@click.option("--state-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Broker data and snapshots (CSM_STATE_DIR, default "
                   "$XDG_DATA_HOME/csm or ~/.local/share/csm).")
@click.option("--ephemeral", is_flag=True, default=None,
              help="Embedded broker in memory only: everything is lost at exit "
                   "(CSM_EPHEMERAL; for tests and demos).")
def serve(host: str | None, port: int | None, backend: str | None, state_dir: Path | None,
          ephemeral: bool | None) -> None:
    """Start the API and the matching runtime; with no CSM_KAFKA_BOOTSTRAP, an embedded
    Kafka-compatible broker too, durable under the state directory. Every setting is a
    CSM_* environment variable. A locked or damaged state directory exits 2."""
    from .app import open_state
    from .serve import serve as run_server
    from .settings import Settings
    given = {"host": host, "port": port, "backend": backend, "state_dir": state_dir,
             "ephemeral": ephemeral}
    with _errors():
        settings = Settings(**{k: v for k, v in given.items() if v is not None})
        state = open_state(settings)
    run_server(settings, state)


if __name__ == "__main__":  # pragma: no cover
    main()
