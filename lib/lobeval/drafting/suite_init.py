"""`lobeval init`: a new suite from what a team already has (docs/cli.md#a-new-suite-init).

init_suite() reads as its steps: find where the suite and its data go and refuse a place already taken, read
the tools (a tools list, an OpenAPI 3 document, a τ²-bench tools.py or an MCP server) and check them as a
suite's tools.json, read the data (CSV files, or a database snapshotted into CSV), infer suite.json from the
data, write everything in a staging folder, load the staged suite as `generate` would and check every record,
then rename it into place.
Bad input writes nothing.
"""
from __future__ import annotations

import csv
import io
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time
from pathlib import Path
from typing import Any

from sqlalchemy import MetaData, create_engine, inspect, select
from sqlalchemy import Table as DbTable
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError, SQLAlchemyError

from lobeval.workspace.benchmark_tools import tau2_tools
from lobeval.core.errors import ConfigError, RecordError
from lobeval.generation.generate import check_data
from lobeval.workspace.openapi import functions_from_document, read_document
from lobeval.core.records import SCHEMA_VERSION, write_json
from lobeval.workspace.suite import (
    Ask, check_tools, load_suite, parse_csv_typed, read_csv_typed, repo_root, settle_effects, snake_case,
)

SNAPSHOT_FILE = "snapshot.json"
DOCUMENT_SUFFIXES = (".json", ".yaml", ".yml")
CONNECT_TIMEOUT_S = 30
"""How long a database may take to answer the connection (given to the drivers that take it, see _connect_args)."""


@dataclass(frozen=True)
class Table:
    """One table of business data as the suite will read it."""

    name: str
    """The entity's name: the table's (or CSV file's) name in snake_case."""
    origin: str
    """Where it was read: the CSV file, or the database (for messages)."""
    file: str
    """The CSV file's name in the suite's data folder."""
    rows: list[dict[str, Any]]
    """Typed as `generate` reads them (suite.read_csv_typed)."""
    primary_key: str | None = None
    """The database's one-column primary key, when it has one."""
    text: str | None = None
    """The CSV text to write (a database's snapshot); None: the file `source` is copied."""
    source: Path | None = None


@dataclass
class InitResult:
    suite_dir: Path
    data_dir: Path
    tools: list[dict[str, Any]]
    entities: dict[str, dict[str, Any]]
    inferred: list[str] = field(default_factory=list)
    unresolved: list[str] = field(default_factory=list)
    """What could not be inferred, for the user to settle in suite.json."""

    def summary(self) -> list[str]:
        writes = sum(tool["effect"] == "write" for tool in self.tools)
        lines = [f"wrote {self.suite_dir}: tools.json ({len(self.tools)} functions: {len(self.tools) - writes} "
                 f"read, {writes} write), suite.json ({len(self.entities)} entities), templates.json (no "
                 f"scenarios yet); data in {self.data_dir}", "inferred:"]
        lines += [f"  {line}" for line in self.inferred]
        lines += ["could not infer (edit suite.json if it matters):", *(f"  {line}" for line in self.unresolved)] \
            if self.unresolved else []
        return lines


def init_suite(suite_dir: str | Path, tools_source: str, data_source: str, *, tables: list[str] | None = None,
               effects: dict[str, str] | None = None, ask: Ask | None = None) -> InitResult:
    """Write a new suite at `suite_dir` (its data under data/<name>/ beside scenarios/, as load_suite finds it);
    `tables` picks tables (or CSV files, by name); `effects` and `ask` settle the effects the tools do not say."""
    suite_dir = Path(suite_dir).absolute()
    root, name = repo_root(suite_dir), suite_dir.name
    data_dir = root / "data" / name
    in_place = Path(data_source).is_dir() and Path(data_source).resolve() == data_dir.resolve()
    _check_free(suite_dir, None if in_place else data_dir)
    tools = read_tools(tools_source, effects or {}, ask)
    check_tools(tools, tools_source)
    found, snapshot = read_data(data_source, tables)
    entities, inferred, unresolved = infer_entities(found, f"data/{name}")
    inferred.insert(0, "tools: " + ", ".join(f"{tool['function']['name']} ({tool['effect']})" for tool in tools))
    _write_in_place(suite_dir, data_dir, in_place, {
        "tools.json": tools, "templates.json": [],
        "suite.json": {"name": name, "entities": entities}}, [t for t in found if t.name in entities], snapshot)
    return InitResult(suite_dir, data_dir, tools, entities, inferred, unresolved)


def _check_free(suite_dir: Path, data_dir: Path | None) -> None:
    if suite_dir.exists() and (not suite_dir.is_dir() or any(suite_dir.iterdir())):
        raise ConfigError(f"{suite_dir}: already exists and is not an empty folder; init writes a new suite only")
    if data_dir is not None and data_dir.exists() and (not data_dir.is_dir() or any(data_dir.iterdir())):
        raise ConfigError(f"{data_dir}: the new suite's data folder already holds files; give --data that folder "
                          f"to use them, or choose another suite name")


# --- tools -----------------------------------------------------------------------------------------------------

def read_tools(source: str, effects: dict[str, str], ask: Ask | None) -> list[dict[str, Any]]:
    """tools.json entries from a document (a file, or a name ending .json / .yaml / .yml), a τ²-bench domain's
    tools.py (a .py file, read without being run) or an MCP server (a command line or, as every URL, a
    streamable HTTP endpoint)."""
    path = Path(source)
    if source.startswith(("http://", "https://")) or not (path.is_file() or path.suffix.lower() in DOCUMENT_SUFFIXES):
        from lobeval.targets.mcp_tools import tools_from_mcp   # the MCP SDK and the model client: seconds to import

        return tools_from_mcp(source, effects=effects, ask=ask)
    functions = tau2_tools(path) if path.suffix.lower() == ".py" else functions_from_document(path, read_document(path))
    settled = settle_effects(str(path), {function["name"]: effect for function, effect in functions}, effects, ask,
                             'the document does not say (lobeval\'s "effect": "read" or "write" beside "function")')
    return [{"type": "function", "effect": settled[function["name"]], "function": function}
            for function, _ in functions]


# --- data ------------------------------------------------------------------------------------------------------

def read_data(source: str, picked: list[str] | None) -> tuple[list[Table], dict[str, Any] | None]:
    """The tables of a CSV folder, a SQLite file or a database URL; for a database, its snapshot record."""
    path = Path(source)
    if path.is_dir():
        return _csv_folder(path, picked), None
    if path.is_file() and path.suffix.lower() == ".csv":
        raise ConfigError(f"--data {source}: give the folder that holds the CSV files (one per table)")
    if "://" in source or path.is_file():
        return _database(source, picked)
    raise ConfigError(f"--data {source}: no such folder or file, and not a database URL (dialect://...)")


def _csv_folder(folder: Path, picked: list[str] | None) -> list[Table]:
    files = {path.stem: path for path in sorted(folder.glob("*.csv"))}
    if not files:
        raise ConfigError(f"--data {folder}: holds no .csv files")
    tables = [Table(name=snake_case(stem), origin=str(path), file=path.name, rows=read_csv_typed(path), source=path)
              for stem, path in files.items() if stem in _chosen(f"--data {folder}", list(files), picked)]
    _check_tables(f"--data {folder}", tables)
    return tables


def _chosen(source: str, names: list[str], picked: list[str] | None) -> list[str]:
    unknown = [name for name in picked or [] if name not in names]
    if unknown:
        raise ConfigError(f"{source}: no table {', '.join(map(repr, unknown))} (it has: {', '.join(names) or 'none'})")
    return picked or names


def _check_tables(source: str, tables: list[Table]) -> None:
    """Some table holds records, and no two make the same entity."""
    if not any(table.rows for table in tables):
        raise ConfigError(f"{source}: no table holds a record: a suite needs business data")
    seen: dict[str, str] = {}
    for table in tables:
        if table.name in seen:
            raise ConfigError(f"{source}: tables {seen[table.name]!r} and {table.file!r} both make the entity "
                              f"{table.name!r}; pick one with --table")
        seen[table.name] = table.file


def _database(source: str, picked: list[str] | None) -> tuple[list[Table], dict[str, Any]]:
    """Every chosen table read whole, in primary-key order, as CSV text; the record says from where and when."""
    url = database_url(source)
    shown = shown_url(url)
    try:
        engine = create_engine(url, connect_args=_connect_args(url.get_driver_name()))
    except NoSuchModuleError:   # a dialect SQLAlchemy does not know and no installed package adds
        raise ConfigError(f"--data {shown}: SQLAlchemy knows no database {url.drivername!r}: its own are mssql, mysql, "
                          f"mariadb, oracle, postgresql and sqlite; another comes in a package of its own (a dialect "
                          f"for SQLAlchemy)") from None
    except ImportError as exc:   # a known dialect whose driver (its DBAPI module) is not installed
        raise ConfigError(f"--data {shown}: no driver for {url.drivername!r} is installed: "
                          f"{_install(exc.name)}") from None
    tables, record = [], {}
    try:
        with engine.connect() as connection:
            names = sorted(inspect(connection).get_table_names())
            for name in _chosen(f"--data {shown}", names, picked):
                table = DbTable(name, MetaData(), autoload_with=connection)
                key = [column.name for column in table.primary_key.columns]
                order = list(table.primary_key.columns) or list(table.columns)
                rows = connection.execute(select(table).order_by(*order))
                text = _csv_text([column.name for column in table.columns], rows)
                tables.append(Table(name=snake_case(name), origin=shown, file=f"{snake_case(name)}.csv",
                                    rows=parse_csv_typed(text, f"{shown} table {name!r}"),
                                    primary_key=snake_case(key[0]) if len(key) == 1 else None, text=text))
                record[name] = {"csv": tables[-1].file, "rows": len(tables[-1].rows), "primary_key": key}
    except SQLAlchemyError as exc:
        cause = getattr(exc, "orig", None) or exc
        raise ConfigError(f"--data {shown}: cannot read the database: {type(cause).__name__}: "
                          f"{str(cause).splitlines()[0] if str(cause) else ''}") from None
    finally:
        engine.dispose()
    _check_tables(f"--data {shown}", tables)
    return tables, {"schema_version": SCHEMA_VERSION, "source": shown,
                    "taken_at": datetime.now(UTC).isoformat(timespec="seconds"), "tables": record}


def database_url(source: str) -> URL:
    """A SQLAlchemy URL; a SQLite database (a file path or a sqlite:// URL) is opened read-only, so that a wrong
    path is an error rather than a new empty database."""
    if "://" not in source:
        return URL.create("sqlite", database=f"file:{Path(source).resolve()}", query={"mode": "ro", "uri": "true"})
    try:
        url = make_url(source)
    except (ArgumentError, ValueError):   # (a port not a number) its message may quote the URL and its password
        raise ConfigError("--data: not a database URL (dialect+driver://user:password@host:port/database)") from None
    if url.get_backend_name() == "sqlite" and url.database and url.database != ":memory:" \
            and not url.database.startswith("file:"):
        url = url.set(database=f"file:{Path(url.database).resolve()}", query={**url.query, "mode": "ro", "uri": "true"})
    return url


def shown_url(url: URL) -> str:
    """The URL as recorded and printed: without user, password or query (which may hold credentials too); a
    SQLite database as its file."""
    if url.get_backend_name() == "sqlite" and (url.database or "").startswith("file:"):
        return f"sqlite:///{url.database.removeprefix('file:')}"
    return URL.create(url.drivername, host=url.host, port=url.port, database=url.database).render_as_string()


DRIVER_PACKAGES = {"psycopg": '"psycopg[binary]"', "psycopg2": "psycopg2-binary", "pg8000": "pg8000",
                   "asyncpg": "asyncpg", "MySQLdb": "mysqlclient", "pymysql": "PyMySQL", "mariadb": "mariadb",
                   "mysql": "mysql-connector-python", "aiomysql": "aiomysql", "asyncmy": "asyncmy",
                   "oracledb": "oracledb", "cx_Oracle": "cx_Oracle", "pyodbc": "pyodbc", "pymssql": "pymssql",
                   "aiosqlite": "aiosqlite"}
"""The pip package of each driver module SQLAlchemy's own dialects import (their docs' :dbapi: and :url:; psycopg's
and psycopg2's as psycopg.org recommends them: the binary builds need no libpq)."""


def _install(module: str | None) -> str:
    """What to install for a driver module that could not be imported."""
    package = DRIVER_PACKAGES.get((module or "").split(".")[0])
    if package is None:
        return f"install the package that provides the module {module} (SQLAlchemy's driver for it)"
    return (f"pip install {package} (the module {module}, the driver SQLAlchemy uses for it; another driver is named "
            f"in the URL as dialect+driver://)")


def _connect_args(driver: str) -> dict[str, Any]:
    """The connection deadline, under the name each driver takes it: `connect_timeout` for psycopg, PyMySQL and
    mysqlclient; sqlite3's `timeout` is how long a locked file is waited for. Other drivers get none (an unknown
    argument would fail the connection)."""
    name = {"pysqlite": "timeout", "psycopg2": "connect_timeout", "psycopg": "connect_timeout",
            "pymysql": "connect_timeout", "mysqldb": "connect_timeout"}.get(driver)
    return {name: CONNECT_TIMEOUT_S} if name else {}


def _csv_text(header: list[str], rows) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows([_cell(value) for value in row] for row in rows)
    return out.getvalue()


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.hex()
    return str(value)


# --- suite.json from the data ----------------------------------------------------------------------------------

def infer_entities(tables: list[Table], csv_folder: str) -> tuple[dict[str, dict[str, Any]], list[str], list[str]]:
    """suite.json's entities (each table with records, its id column, and a parent when one column's values are
    all another table's ids), what was inferred and how, and what could not be."""
    inferred, unresolved, ids = [], [], {}
    for table in tables:
        if not table.rows:
            unresolved.append(f"{table.file}: no records, left out")
            continue
        column, how = id_column(table)
        if column is None:
            raise RecordError(table.origin, f"table {table.name!r}", None,
                              f"no id column: no one-column primary key, no column named id or {table.name}_id, "
                              f"and no column whose values are all present and different")
        ids[table.name] = (column, {row[column] for row in table.rows})
        inferred.append(f"{table.name}: {csv_folder}/{table.file}, {len(table.rows)} records, id {column} ({how})")
    entities = {table.name: {"csv": f"{csv_folder}/{table.file}", "id": ids[table.name][0]}
                for table in tables if table.name in ids}
    for table in (t for t in tables if t.name in ids):
        found = parent_candidates(table, ids)
        chosen = next((c for c in found if not _closes_cycle(entities, table.name, c[0])), None)
        for entity, column, _ in found:
            if chosen and (entity, column) != chosen[:2]:
                unresolved.append(f"{table.name}.{column} holds {entity} ids too (one parent per entity: "
                                  f"{table.name} is a child of {chosen[0]})")
            elif not chosen:
                unresolved.append(f"{table.name}.{column} holds {entity} ids, but {entity} descends from "
                                  f"{table.name}: left out")
        if chosen:
            entities[table.name]["parent"] = {"entity": chosen[0], "key": chosen[1]}
            inferred.append(f"{table.name}: child of {chosen[0]} through {chosen[1]} ({chosen[2]})")
        unresolved += [f"{table.name}.{column}: looks like a reference, but no table's ids hold all its values"
                       for column in table.rows[0] if column.endswith("_id") and column != ids[table.name][0]
                       and column not in {c for _, c, _ in found}]
    return entities, inferred, unresolved


def id_column(table: Table) -> tuple[str | None, str]:
    """The id column and how it was found: the database's primary key, a column named id or <table>_id
    (also with the table's name without a final s), else the first column whose values are all present and
    different (a guess); each only when its values are present and different."""
    named = ["id", f"{table.name}_id", f"{table.name.removesuffix('s')}_id"]
    candidates = [(table.primary_key, "the primary key")] if table.primary_key else []
    candidates += [(name, "its name") for name in named] + [(column, "a guess: the first column whose values are "
                                                                       "all present and different")
                                                             for column in table.rows[0]]
    for column, how in candidates:
        if column in table.rows[0]:
            values = [row[column] for row in table.rows]
            if all(value not in (None, "") for value in values) and len(set(values)) == len(values):
                return column, how
    return None, ""


def parent_candidates(table: Table, ids: dict[str, tuple[str, set[Any]]]) -> list[tuple[str, str, str]]:
    """(entity, column, why) for each column of `table` whose values are all present and all ids of another
    entity, named ones first: a column is named after an entity when its name holds the entity's name, or that
    name without a final s, as whole words (`parent_ticket_id` for tickets; not `pipeline_stage` for line).
    Whole numbers alone say little (1, 2, 3 are every table's ids), so a column of them counts only when named."""
    found = []
    for column in table.rows[0]:
        if column == ids[table.name][0]:
            continue
        values = {row[column] for row in table.rows}
        if None in values or "" in values:
            continue
        for entity, (_, entity_ids) in ids.items():
            named = any(f"_{name}_" in f"_{column}_" for name in (entity, entity.removesuffix("s")))
            numbers = all(isinstance(value, int) for value in values)
            if entity != table.name and values <= entity_ids and (named or not numbers):
                found.append((entity, column, "its name and values" if named else "its values"))
    return sorted(found, key=lambda candidate: candidate[2] != "its name and values")


def _closes_cycle(entities: dict[str, dict[str, Any]], child: str, parent: str) -> bool:
    seen = set()
    while parent is not None and parent not in seen:
        if parent == child:
            return True
        seen.add(parent)
        parent = (entities[parent].get("parent") or {}).get("entity")
    return False


# --- writing ---------------------------------------------------------------------------------------------------

def _write_in_place(suite_dir: Path, data_dir: Path, in_place: bool, documents: dict[str, Any], tables: list[Table],
                    snapshot: dict[str, Any] | None) -> None:
    """Stage the suite (and its data) in a folder beside it, check it as `generate` would, rename into place."""
    root = repo_root(suite_dir)
    suite_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=suite_dir.parent, prefix=f".{suite_dir.name}.", suffix=".tmp"))
    try:
        staged_root = staging if root != suite_dir else staging / suite_dir.name
        staged_suite, staged_data = staged_root / suite_dir.relative_to(root), staged_root / "data" / suite_dir.name
        staged_suite.mkdir(parents=True, exist_ok=True)
        staged_data.parent.mkdir(parents=True, exist_ok=True)
        if in_place:
            staged_data.symlink_to(data_dir.resolve(), target_is_directory=True)
        else:
            _write_tables(staged_data, tables, snapshot)
        for name, value in documents.items():
            write_json(staged_suite / name, value)
        check_data(load_suite(staged_suite))
        if in_place:
            staged_data.unlink()
        moves = [(staged_root, suite_dir)] if root == suite_dir else \
            [(staged_suite, suite_dir), *([] if in_place else [(staged_data, data_dir)])]
        _move(moves)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _write_tables(folder: Path, tables: list[Table], snapshot: dict[str, Any] | None) -> None:
    folder.mkdir(parents=True)
    for table in tables:
        if table.text is None:
            shutil.copyfile(table.source, folder / table.file)
        else:
            (folder / table.file).write_text(table.text, encoding="utf-8")
    if snapshot is not None:
        write_json(folder / SNAPSHOT_FILE, {**snapshot, "tables": {
            name: entry for name, entry in snapshot["tables"].items()
            if entry["csv"] in {table.file for table in tables}}})


def _move(moves: list[tuple[Path, Path]]) -> None:
    """Rename each staged folder into place; if one fails, the ones already moved go back."""
    done = []
    try:
        for staged, target in moves:
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(staged, target)
            done.append((staged, target))
    except BaseException:
        for staged, target in reversed(done):
            os.replace(target, staged)
        raise
