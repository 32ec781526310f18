"""``tether demo``: a live session with the embedded model that compacts, beats and recalls.

Needs the extra ``tether[local]``. Runs in a temporary home (removed afterwards) unless
``--home DIR`` names a new or empty folder to keep. Exit 0 only when every step did what it
claims; otherwise 1, naming the step.
"""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from tether.demo.steps import STEPS, Event, Ran, run


def _run(home: Path | None, console: Console) -> Ran:
    with Progress(
        SpinnerColumn(),
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} steps"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as progress:
        task = progress.add_task(STEPS[0], total=len(STEPS))
        index = {name: i for i, name in enumerate(STEPS)}

        def on_event(event: Event) -> None:
            mark = "[green]✓[/green]" if event.done else " "
            progress.console.print(
                f"{mark} [cyan]{event.step:<11}[/cyan] {escape(event.text)}",
                highlight=False,
                soft_wrap=True,
            )
            if event.done:
                nxt = index[event.step] + 1
                progress.update(
                    task, completed=nxt, description=STEPS[nxt] if nxt < len(STEPS) else "done"
                )

        return run(home, on_event)


@click.command("demo")
@click.option(
    "--home",
    "demo_home",
    metavar="DIR",
    type=click.Path(file_okay=False, path_type=Path),
    help="Run in DIR (new or empty) and keep it; default: a temporary home, removed after.",
)
def demo_cmd(demo_home: Path | None) -> None:
    """Watch tether work with no server: owner turns, a memory edit, compaction into
    epoch 1, a heartbeat on the background slot, and a recall from epoch 0 (needs
    tether[local]; well under a minute)."""
    console = Console(stderr=False)
    console.print(
        "[bold]tether demo[/bold]: an embedded SmolLM2-135M, a 1024-token context per slot"
    )
    ran = _run(demo_home, console)
    if ran.kept is not None:
        where = f"home kept at {ran.kept}; try `tether --home {ran.kept} session show demo`"
    else:
        where = "temporary home removed (keep one with --home DIR)"
    console.print(
        f"[bold green]demo passed[/bold green]: every step checked in {ran.elapsed:.1f} s; {where}",
        soft_wrap=True,
    )


COMMANDS = [demo_cmd]
