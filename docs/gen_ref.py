"""MkDocs hook: the CLI and HTTP reference pages, generated at build time (never hand-copied).

``reference/cli.md`` is rendered from the ``unieval-local`` argparse parser itself: every
subcommand, every flag (hidden ones marked), its default, choices, help and the epilog.
``reference/http.md`` is rendered from the service's OpenAPI schema: the FastAPI app is built
around an engine that loads no checkpoint (the schema needs none), and each path, request body,
answer and component schema becomes Markdown. Both pages are added as generated files: nothing
is written into ``docs/``. Listed in ``mkdocs.yml`` under ``hooks``.

A page's flag table is generated too: a line ``<!-- flags: COMMAND -->`` in a page of ``docs/``
becomes the tables of that command's flags, group by group (:func:`flag_tables`);
``<!-- flags: COMMAND engine=brief -->`` gives the engine flags it shares with ``score``
(model, device, precision, long inputs ...) as one row that names them all and links to the
CLI reference. No flag table is kept by hand (``tests/test_docs_flags.py``).
"""

from __future__ import annotations

import argparse
import json
import posixpath
import re
from typing import Any

__all__ = ["FLAGS_MARKER", "cli_markdown", "flag_tables", "http_markdown", "openapi_schema", "on_files",
           "on_page_markdown"]

#: A page's generated flag table: ``<!-- flags: COMMAND -->`` or ``<!-- flags: COMMAND engine=brief -->``.
FLAGS_MARKER = re.compile(r"^<!-- flags: (?P<command>[\w-]+)(?P<brief> engine=brief)? -->$", re.M)


def _cell(text: Any) -> str:
    """One Markdown table cell: pipes escaped, lines joined."""
    return " ".join(str(text).split()).replace("|", "\\|") if text not in (None, "") else ""


def _code(text: str) -> str:
    return "`" + text.replace("`", "'") + "`"


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, tuple[argparse.ArgumentParser, str]]:
    """name -> (subparser, its one-line help), in ``--help`` order."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            return {name: (p, helps.get(name, "")) for name, p in action.choices.items()}
    return {}


def _default(action: argparse.Action) -> str:
    if isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
        return ""
    if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
        return _code(str(action.default).lower())
    if action.default in (None, argparse.SUPPRESS) or action.default == []:
        return ""
    return _code(str(action.default))


def _flag_rows(parser: argparse.ArgumentParser, brief: set[str] = frozenset(), brief_help: str = "") -> list[str]:
    """The tables of ``parser``'s arguments, one per group; the actions whose dest is in ``brief``
    are one row (where the first of them is) naming them all, with ``brief_help`` (those hidden
    from ``--help`` left out)."""
    formatter = parser._get_formatter()
    out: list[str] = []
    for group in parser._action_groups:
        actions = [a for a in group._group_actions if not isinstance(a, argparse._SubParsersAction)]
        if not actions:
            continue
        out += ["", f"**{group.title}**" + (f": {group.description}" if group.description else ""), "",
                "| argument | default | help |", "|---|---|---|"]
        briefed = [a for a in parser._actions if a.dest in brief and a.help != argparse.SUPPRESS]
        for action in actions:
            if action.dest in brief:
                if briefed and action is briefed[0]:
                    names = ", ".join(_code(f) for a in briefed for f in a.option_strings)
                    out.append(f"| {_cell(names)} | | {_cell(brief_help)} |")
                continue
            name = ", ".join(action.option_strings) or action.dest
            if action.option_strings and action.nargs != 0:
                metavar = formatter._format_args(action, formatter._get_default_metavar_for_optional(action))
                name += f" {metavar}"
            elif not action.option_strings:
                name = formatter._format_args(action, formatter._get_default_metavar_for_positional(action))
            if action.help == argparse.SUPPRESS:
                text = "(hidden from --help)"
            else:
                text = formatter._expand_help(action) if action.help else ""
            if (action.choices is not None and not isinstance(action.choices, dict)
                    and not all(str(c) in text for c in action.choices)):
                text = text.rstrip(". ") + ". Choices: " + ", ".join(_code(str(c)) for c in action.choices) + "."
            out.append(f"| {_cell(_code(name))} | {_cell(_default(action))} | {_cell(text)} |")
    return out


def cli_markdown() -> str:
    """The CLI reference page: ``unieval-local --help`` and every subcommand's arguments."""
    from unieval_local.cli import _build_parser

    parser = _build_parser()
    lines = ["# Command line reference", "",
             "Generated from the `unieval-local` argument parser when this site was built: every "
             "subcommand, every flag with its default and help, and the examples of its epilog. "
             "Exit statuses: [Exit statuses](../exit-status.md).", "",
             "```text", parser.format_help().rstrip(), "```"]
    for name, (sub, one_line) in _subparsers(parser).items():
        lines += ["", f"## unieval-local {name}", ""]
        if one_line:
            lines += [one_line, ""]
        lines += ["```text", sub.format_usage().rstrip(), "```"]
        if sub.description:
            lines += ["", "```text", sub.description.rstrip(), "```"]
        lines += _flag_rows(sub)
        if sub.epilog:
            lines += ["", "```text", sub.epilog.rstrip(), "```"]
    return "\n".join(lines) + "\n"


def flag_tables(command: str, page: str = "index.md", brief_engine: bool = False) -> str:
    """The flag tables of ``unieval-local COMMAND`` for the page ``page`` (its path under
    ``docs/``, for the link to the CLI reference), one per argument group, from the parser.

    Args:
        brief_engine: the engine flags (:func:`unieval_local.settings.cli_settings`, shared with
            ``score``, and ``--no-progress``) as one row naming them all, linking to the reference.
    """
    from unieval_local.cli import _build_parser
    from unieval_local.settings import cli_settings

    sub = _subparsers(_build_parser(command)).get(command)
    if sub is None:
        raise ValueError(f"<!-- flags: {command} -->: no such command")
    link = posixpath.relpath("reference/cli.md", posixpath.dirname(page) or ".") + f"#unieval-local-{command}"
    brief = {s.name for s in cli_settings()} | {"no_progress"} if brief_engine else set()
    help_text = (f"the engine flags, the same as `score`'s (one declaration makes both): each with its help and "
                 f"default in the [Command line reference]({link})")
    rows = _flag_rows(sub[0], brief, help_text)
    full = "--help-all" if any("--help-all" in a.option_strings for a in sub[0]._actions) else "--help"
    return "\n".join([f"Generated from `unieval-local {command}`'s parser when this site was built "
                      f"(`unieval-local {command} {full}` prints the same):", *rows]).strip() + "\n"


def on_page_markdown(markdown: str, page, config, files):  # noqa: ANN001 (MkDocs hook signature)
    """Replace each ``<!-- flags: COMMAND -->`` line of a page with its flag tables (:data:`FLAGS_MARKER`)."""
    return FLAGS_MARKER.sub(lambda m: flag_tables(m["command"], page.file.src_uri, bool(m["brief"])), markdown)


def openapi_schema() -> dict[str, Any]:
    """The service's OpenAPI schema, from an app built around an engine that loads nothing."""
    from unieval_local.engine import Engine
    from unieval_local.service.app import create_app
    from unieval_local.service.handlers import Service

    return create_app(Service(Engine()), api_key="documentation").app.openapi()


def _type(schema: dict[str, Any]) -> str:
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{name.lower()})"
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            return " or ".join(_type(s) for s in schema[key])
    kind = schema.get("type", "any")
    if kind == "array":
        return f"array of {_type(schema.get('items', {}))}"
    if kind == "object" and "additionalProperties" in schema and isinstance(schema["additionalProperties"], dict):
        return f"object of {_type(schema['additionalProperties'])}"
    if "enum" in schema:
        return " \\| ".join(_code(json.dumps(v)) for v in schema["enum"])
    return str(kind)


def _body_ref(content: dict[str, Any]) -> str:
    schema = content.get("application/json", {}).get("schema")
    return _type(schema) if schema else ", ".join(content) or "-"


def http_markdown(schema: dict[str, Any] | None = None) -> str:
    """The HTTP reference page: every path and method, body, answers, and the schemas."""
    schema = schema or openapi_schema()
    info = schema.get("info", {})
    lines = ["# HTTP API reference", "",
             f"Generated from the OpenAPI schema of `unieval-local serve` (version {info.get('version')}) "
             "when this site was built; a running service serves the same schema at `/openapi.json` and "
             "Swagger UI at `/docs`. Usage, limits and errors: [Serving](../serving.md).", "",
             info.get("description", "")]
    for path, methods in schema.get("paths", {}).items():
        for method, op in methods.items():
            lines += ["", f"## {method.upper()} {path}", ""]
            if op.get("summary"):
                lines += [f"**{op['summary']}**", ""]
            if op.get("description"):
                lines += [op["description"], ""]
            params = op.get("parameters", [])
            if params:
                lines += ["| parameter | in | type | required |", "|---|---|---|---|"]
                lines += [f"| `{p['name']}` | {p['in']} | {_cell(_type(p.get('schema', {})))} | "
                          f"{'yes' if p.get('required') else 'no'} |" for p in params]
                lines.append("")
            body = op.get("requestBody")
            if body:
                lines += [f"Request body: {_body_ref(body.get('content', {}))}", ""]
            lines += ["| status | meaning | body |", "|---|---|---|"]
            for status, answer in op.get("responses", {}).items():
                lines.append(f"| {status} | {_cell(answer.get('description', ''))} | "
                             f"{_cell(_body_ref(answer.get('content', {})))} |")
    lines += ["", "## Schemas"]
    for name, comp in sorted(schema.get("components", {}).get("schemas", {}).items()):
        lines += ["", f"### {name}", ""]
        if comp.get("description"):
            lines += [" ".join(comp["description"].split()), ""]
        props = comp.get("properties")
        if props:
            required = set(comp.get("required", []))
            lines += ["| field | type | required | default | description |", "|---|---|---|---|---|"]
            for field, spec in props.items():
                default = _code(json.dumps(spec["default"])) if "default" in spec else ""
                lines.append(f"| `{field}` | {_cell(_type(spec))} | {'yes' if field in required else 'no'} | "
                             f"{_cell(default)} | {_cell(spec.get('description', ''))} |")
        else:
            lines.append(f"Type: {_cell(_type(comp))}")
    return "\n".join(lines) + "\n"


def on_files(files, config):  # noqa: ANN001 (MkDocs hook signature)
    """Add the generated reference pages to the site's files."""
    from mkdocs.structure.files import File

    files.append(File.generated(config, "reference/cli.md", content=cli_markdown()))
    files.append(File.generated(config, "reference/http.md", content=http_markdown()))
    return files
