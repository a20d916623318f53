"""A click group whose subcommands are imported only when run, so ``shoal --help`` stays fast and a command's
heavy imports (tornado, SQLAlchemy, matplotlib) cost nothing to the others."""

from __future__ import annotations

import importlib

import click


class LazyGroup(click.Group):
    def __init__(self, *args: object, lazy: dict[str, tuple[str, str]] | None = None, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.lazy = dict(lazy or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(self.lazy))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy:
            target, help_text = self.lazy[cmd_name]
            module_name, attr = target.split(":")
            try:
                module = importlib.import_module(module_name)
            except ModuleNotFoundError as exc:
                if exc.name and module_name.startswith(exc.name):
                    return _unavailable(cmd_name, help_text)
                raise
            command = getattr(module, attr)
            assert isinstance(command, click.Command)
            return command
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # List lazily registered commands by their one-line help without importing them.
        rows = [(name, self.lazy[name][1]) for name in sorted(self.lazy)]
        rows += [(name, cmd.get_short_help_str()) for name, cmd in sorted(self.commands.items())]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(sorted(rows))


def _unavailable(name: str, help_text: str) -> click.Command:
    def run() -> None:
        raise click.UsageError(f"'shoal {name}' is not part of this build yet")

    return click.Command(name, callback=run, help=help_text)
