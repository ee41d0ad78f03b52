"""`lobeval init`: a suite from an OpenAPI document and a SQLite database (a library's loans, made here), and from
the sample's MCP server and CSV files; what it infers, and bad input that writes nothing."""
from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

import lobeval.targets.mcp_tools  # noqa: F401  the MCP SDK binds sys.stderr when imported: before capsys replaces it
from lobeval.cli import main
from lobeval.core.errors import ConfigError, RecordError
from lobeval.generation.generate import check_data
from lobeval.workspace.openapi import functions_from_document, read_document
from lobeval.core.records import read_cases
from lobeval.workspace.suite import check_tools, load_suite
from lobeval.drafting.suite_init import Table, database_url, id_column, infer_entities, read_data, read_tools, shown_url

REPO = Path(__file__).resolve().parents[2]
SAMPLE_SERVER = "python -m lobeval.samples.support_tickets.mcp_server"

LIBRARY_API = """\
openapi: 3.0.3
info: {title: Library, version: "1"}
paths:
  /books/{isbn}:
    parameters:
      - {name: isbn, in: path, required: true, description: The book's ISBN, schema: {type: string}}
    get:
      operationId: getBook
      summary: Look up a book
  /books/search:
    post:
      operationId: searchBooks
      summary: Find books by title
      requestBody:
        content:
          application/json:
            schema: {type: object, properties: {title: {type: string}}}
  /loans:
    get:
      summary: A member's loans
      parameters:
        - {name: member_no, in: query, required: true, schema: {type: string}}
        - {name: X-Branch, in: header, schema: {type: string}}
        - {name: Authorization, in: header, schema: {type: string}}
        - {name: session, in: cookie, schema: {type: string}}
    post:
      operationId: lendBook
      summary: Lend a book
      description: Lends a copy to a member.
      requestBody:
        required: true
        content:
          application/json:
            schema: {$ref: '#/components/schemas/NewLoan'}
  /loans/{loan_id}/return:
    post:
      summary: Return a book
      parameters: [{$ref: '#/components/parameters/LoanId'}]
  /loans/{loan_id}:
    patch:
      operationId: renewLoan
      parameters: [{$ref: '#/components/parameters/LoanId'}]
      requestBody:
        content:
          application/json:
            schema: {type: object, properties: {due_date: {type: string, format: date}}}
  /shelves:
    put:
      operationId: arrangeShelf
      requestBody:
        content:
          application/json:
            schema: {$ref: '#/components/schemas/Shelf'}
    options:
      operationId: shelfOptions
components:
  parameters:
    LoanId: {name: loan_id, in: path, required: true, schema: {type: integer}}
  schemas:
    Isbn: {type: string, pattern: '^[0-9-]{10,17}$'}
    NewLoan:
      type: object
      required: [isbn, member_no]
      properties:
        isbn: {$ref: '#/components/schemas/Isbn'}
        member_no: {type: string}
    Shelf:
      type: array
      items: {type: object, properties: {label: {type: string}, inside: {$ref: '#/components/schemas/Shelf'}}}
"""

LOAN_ID = {"type": "integer"}
FUNCTIONS = [   # hand-derived from LIBRARY_API
    ({"name": "getBook", "description": "Look up a book", "parameters": {
        "type": "object", "properties": {"isbn": {"type": "string", "description": "The book's ISBN"}},
        "required": ["isbn"]}}, "read"),
    ({"name": "searchBooks", "description": "Find books by title", "parameters": {
        "type": "object", "properties": {"title": {"type": "string"}}}}, "write"),
    ({"name": "get_loans", "description": "A member's loans", "parameters": {
        "type": "object", "properties": {"member_no": {"type": "string"}, "X-Branch": {"type": "string"}},
        "required": ["member_no"]}}, "read"),
    ({"name": "lendBook", "description": "Lend a book. Lends a copy to a member.", "parameters": {
        "type": "object", "properties": {"isbn": {"type": "string", "pattern": "^[0-9-]{10,17}$"},
                                         "member_no": {"type": "string"}},
        "required": ["isbn", "member_no"]}}, "write"),
    ({"name": "post_loans_loan_id_return", "description": "Return a book", "parameters": {
        "type": "object", "properties": {"loan_id": LOAN_ID}, "required": ["loan_id"]}}, "write"),
    ({"name": "renewLoan", "description": "", "parameters": {
        "type": "object", "properties": {"loan_id": LOAN_ID, "due_date": {"type": "string", "format": "date"}},
        "required": ["loan_id"]}}, "write"),
    ({"name": "arrangeShelf", "description": "", "parameters": {
        "type": "object", "properties": {"body": {"type": "array", "items": {"type": "object", "properties": {
            "label": {"type": "string"}, "inside": {}}}}}}}, "write"),   # the recursive reference: any value
]

LIBRARY_TABLES = """
CREATE TABLE members (member_no TEXT PRIMARY KEY, name TEXT NOT NULL, joined TEXT);
CREATE TABLE books (isbn TEXT PRIMARY KEY, title TEXT, copies INTEGER);
CREATE TABLE loans (id INTEGER PRIMARY KEY, book_isbn TEXT REFERENCES books, member_no TEXT REFERENCES members,
                    due_date TEXT, returned BOOLEAN);
CREATE TABLE fines (fine_id INTEGER PRIMARY KEY, loan_id INTEGER REFERENCES loans, amount REAL, waived_by TEXT);
CREATE TABLE holds (id INTEGER PRIMARY KEY, isbn TEXT);
INSERT INTO members VALUES ('M-07', 'Ines Duarte', '2024-03-01'), ('M-12', 'Tomasz Wrobel', '2025-01-15'),
                           ('M-30', 'Abebe Girma', NULL);
INSERT INTO books VALUES ('978-0-14-044913-6', 'Crime and Punishment', 2), ('978-0-19-953556-9', 'Middlemarch', 1),
                         ('978-0-452-28423-4', '1984', 3);
INSERT INTO loans VALUES (1, '978-0-14-044913-6', 'M-07', '2026-12-01', 0), (2, '978-0-19-953556-9', 'M-07',
                          '2026-12-03', 1), (3, '978-0-452-28423-4', 'M-12', '2026-11-20', 0);
INSERT INTO fines VALUES (10, 3, 1.5, NULL), (11, 1, 0.75, 'M-30');
"""

# the library's entities, as worked out by hand from LIBRARY_TABLES
LIBRARY_ENTITIES = {
    "books": {"csv": "data/library/books.csv", "id": "isbn"},
    "fines": {"csv": "data/library/fines.csv", "id": "fine_id", "parent": {"entity": "loans", "key": "loan_id"}},
    "loans": {"csv": "data/library/loans.csv", "id": "id", "parent": {"entity": "books", "key": "book_isbn"}},
    "members": {"csv": "data/library/members.csv", "id": "member_no"},
}

LIBRARY_TEMPLATES = [{
    "scenario_name": "renew_a_loan",
    "user_instructions": "Renew your loan of '{books.title}' (loan {loans.id}) until 2027-01-10.",
    "task_completion": "The loan is renewed.",
    "expected_function_calls": [{"functionName": "renewLoan",
                                 "arguments": {"loan_id": "{loans.id}", "due_date": "2027-01-10"}}],
}]


def library_database(folder: Path) -> Path:
    path = folder / "library.db"
    with sqlite3.connect(path) as connection:
        connection.executescript(LIBRARY_TABLES)
    connection.close()
    return path


@pytest.fixture
def library(tmp_path: Path) -> tuple[Path, Path]:
    """(the OpenAPI document, the SQLite database) of a library, outside the repository that gets the suite."""
    source = tmp_path / "source"
    source.mkdir()
    api = source / "library.yaml"
    api.write_text(LIBRARY_API, encoding="utf-8")
    return api, library_database(source)


def run(capsys, *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def listing(folder: Path) -> list[str]:
    return sorted(str(path.relative_to(folder)) for path in folder.rglob("*"))


# --- the tools ------------------------------------------------------------------------------------------------

def test_an_openapi_document_gives_one_function_per_operation(library):
    api, _ = library
    assert functions_from_document(api, read_document(api)) == FUNCTIONS


def test_a_tools_list_gives_its_functions_with_the_effects_it_states(tmp_path):
    tools = [{"type": "function", "effect": "read", "function": {"name": "find", "parameters": {"type": "object"}}},
             {"type": "function", "name": "flat", "description": "the Responses API's form"}]
    path = tmp_path / "tools.json"
    path.write_text(json.dumps(tools), encoding="utf-8")
    assert functions_from_document(path, read_document(path)) == [
        ({"name": "find", "description": "", "parameters": {"type": "object"}}, "read"),
        ({"name": "flat", "description": "the Responses API's form",
          "parameters": {"type": "object", "properties": {}}}, None)]


def test_effects_a_document_does_not_say_are_asked_and_given_ones_are_not(tmp_path):
    path = tmp_path / "tools.json"
    path.write_text(json.dumps([{"type": "function", "function": {"name": name}} for name in ("find", "cancel")]
                               + [{"type": "function", "effect": "read", "function": {"name": "list"}}]))
    asked = []

    def ask(name: str) -> str:
        asked.append(name)
        return "write"

    tools = read_tools(str(path), {"find": "read"}, ask)
    assert asked == ["cancel"]
    assert [(tool["function"]["name"], tool["effect"]) for tool in tools] == [
        ("find", "read"), ("cancel", "write"), ("list", "read")]


@pytest.mark.parametrize("operation, field", [
    ("{parameters: {name: x}}", "parameters"),
    ("{parameters: [{name: x, in: query, schema: integer}]}", "parameters.x.schema"),
    ("{parameters: [{name: x, in: body}]}", "parameters"),
    ("{requestBody: {content: {application/json: {schema: [1]}}}}", "requestBody.content.schema"),
    ("{requestBody: {required: true, content: {application/json: {schema: {properties: {a: {}}, required: a}}}}}",
     "requestBody.content.schema.required"),
    ("{requestBody: {content: {}}}", "requestBody.content"),
])
def test_a_malformed_operation_is_named_with_its_field(tmp_path, operation, field):
    path = tmp_path / "api.yaml"
    path.write_text(f"openapi: 3.1.0\npaths:\n  /x:\n    post: {operation}\n")
    with pytest.raises(RecordError) as caught:
        functions_from_document(path, read_document(path))
    assert (caught.value.record, caught.value.field) == ("operation 'POST /x'", field)


@pytest.mark.parametrize("entry, record, field", [
    (5, "tool 0", None),
    ({"type": "function", "function": {"description": "no name"}}, "tool 0", "function.name"),
    ({"type": "function", "function": "lookup"}, "tool 0", "function.name"),
    ({"type": "function", "function": {"name": "lookup", "description": 3}}, "tool 'lookup'", "function.description"),
    ({"type": "function", "effect": "delete", "function": {"name": "lookup"}}, "tool 'lookup'", "effect"),
])
def test_a_malformed_tool_is_named_with_its_field(tmp_path, entry, record, field):
    path = tmp_path / "tools.json"
    path.write_text(json.dumps([entry]))
    with pytest.raises(RecordError) as caught:
        functions_from_document(path, read_document(path))
    assert (caught.value.record, caught.value.field) == (record, field)


# --- the data -------------------------------------------------------------------------------------------------

def table(name: str, rows: list[dict], primary_key: str | None = None) -> Table:
    return Table(name=name, origin=f"{name}.csv", file=f"{name}.csv", rows=rows, primary_key=primary_key)


@pytest.mark.parametrize("rows, primary_key, expected", [
    ([{"code": "A", "id": 1}, {"code": "B", "id": 2}], "code", ("code", "the primary key")),
    ([{"code": "A", "id": 1}, {"code": "B", "id": 2}], None, ("id", "its name")),
    ([{"name": "x", "orders_id": 7}, {"name": "x", "orders_id": 8}], None, ("orders_id", "its name")),
    ([{"name": "x", "order_id": 7}, {"name": "x", "order_id": 8}], None, ("order_id", "its name")),
    ([{"id": 1, "ref": "R1"}, {"id": 1, "ref": "R2"}], None,   # a repeated id is no id
     ("ref", "a guess: the first column whose values are all present and different")),
    ([{"note": "", "ref": "R1"}, {"note": "b", "ref": "R2"}], None,   # an empty value is no id
     ("ref", "a guess: the first column whose values are all present and different")),
    ([{"id": 1, "ref": "R1"}, {"id": 1, "ref": "R1"}], None, (None, "")),
])
def test_the_id_column(rows, primary_key, expected):
    assert id_column(table("orders", rows, primary_key)) == expected


def test_a_parent_is_a_column_whose_values_are_all_ids_of_another_table():
    customers = table("customers", [{"id": "C1"}, {"id": "C2"}, {"id": "C3"}])
    coupons = table("coupons", [{"id": 1}, {"id": 2}, {"id": 3}])
    orders = table("orders", [{"id": 1, "customer_id": "C2", "qty": 3, "contact": "C1", "coupon_id": 2},
                              {"id": 2, "customer_id": "C2", "qty": 1, "contact": "C3", "coupon_id": None}])
    entities, inferred, unresolved = infer_entities([customers, coupons, orders], "data/shop")
    # qty's 3 and 1 are coupon ids too, but whole numbers count only under the other table's name
    assert entities["orders"] == {"csv": "data/shop/orders.csv", "id": "id",
                                  "parent": {"entity": "customers", "key": "customer_id"}}
    assert "orders: child of customers through customer_id (its name and values)" in inferred
    assert unresolved == [   # text values need no name; a column with a value missing is no parent
        "orders.contact holds customers ids too (one parent per entity: orders is a child of customers)",
        "orders.coupon_id: looks like a reference, but no table's ids hold all its values"]


def test_a_name_counts_as_whole_words():
    lines = table("line", [{"id": 1}, {"id": 2}, {"id": 3}])
    deals = table("deals", [{"id": 7, "pipeline_stage": 1, "line_id": 2}, {"id": 8, "pipeline_stage": 2, "line_id": 3}])
    entities, inferred, _ = infer_entities([lines, deals], "data/crm")
    assert entities["deals"]["parent"] == {"entity": "line", "key": "line_id"}
    assert [line for line in inferred if "child" in line] == ["deals: child of line through line_id (its name and values)"]


def test_a_parent_that_would_close_a_circle_is_left_out():
    teams = table("teams", [{"id": "T1", "lead": "e1"}])
    staff = table("staff", [{"id": "e1", "teams_id": "T1"}])
    entities, _, unresolved = infer_entities([teams, staff], "data/org")
    assert entities["teams"]["parent"] == {"entity": "staff", "key": "lead"}
    assert "parent" not in entities["staff"]
    assert unresolved == ["staff.teams_id holds teams ids, but teams descends from staff: left out"]


def test_names_in_another_style_are_read_as_the_suite_reads_its_csv_headers(tmp_path):
    """PascalCase tables and columns, no declared keys where the names say them."""
    path = tmp_path / "trade.db"
    with sqlite3.connect(path) as connection:
        connection.executescript("""
            CREATE TABLE "Customers" ("CustomerID" TEXT, "CompanyName" TEXT);
            CREATE TABLE "Orders" ("OrderID" INTEGER PRIMARY KEY, "CustomerID" TEXT, "Freight" REAL);
            INSERT INTO "Customers" VALUES ('ALFKI', 'Alfreds'), ('ANATR', 'Ana Trujillo');
            INSERT INTO "Orders" VALUES (10643, 'ALFKI', 29.46), (10308, 'ANATR', 1.61), (10692, 'ALFKI', 61.02);""")
    connection.close()
    tables, snapshot = read_data(str(path), None)
    assert [(table.name, table.file, table.primary_key) for table in tables] == [
        ("customers", "customers.csv", None), ("orders", "orders.csv", "order_id")]
    assert tables[1].text == "OrderID,CustomerID,Freight\n10308,ANATR,1.61\n10643,ALFKI,29.46\n10692,ALFKI,61.02\n"
    assert snapshot["tables"]["Orders"] == {"csv": "orders.csv", "rows": 3, "primary_key": ["OrderID"]}
    assert infer_entities(tables, "data/trade")[0] == {
        "customers": {"csv": "data/trade/customers.csv", "id": "customer_id"},
        "orders": {"csv": "data/trade/orders.csv", "id": "order_id",
                   "parent": {"entity": "customers", "key": "customer_id"}}}


def test_credentials_are_never_shown():
    assert shown_url(database_url("postgresql://ana:s3cret@db.example:5432/shop?sslpassword=x")) == \
        "postgresql://db.example:5432/shop"
    assert shown_url(database_url("/srv/data/shop.db")) == "sqlite:////srv/data/shop.db"


# --- lobeval init, end to end ---------------------------------------------------------------------------------

def test_an_openapi_document_and_a_sqlite_database_give_a_suite_generate_accepts(library, tmp_path, capsys):
    api, database = library
    repo = tmp_path / "repo"
    (repo / "scenarios").mkdir(parents=True)
    suite = repo / "scenarios" / "library"
    status, out, err = run(capsys, "init", str(suite), "--tools", str(api), "--data", str(database),
                           "--effect", "searchBooks=read")
    assert (status, err) == (0, "")
    assert listing(repo) == ["data", "data/library", "data/library/books.csv", "data/library/fines.csv",
                             "data/library/loans.csv", "data/library/members.csv", "data/library/snapshot.json",
                             "scenarios", "scenarios/library", "scenarios/library/suite.json",
                             "scenarios/library/templates.json", "scenarios/library/tools.json"]
    assert json.loads((suite / "suite.json").read_text()) == {"name": "library", "entities": LIBRARY_ENTITIES}
    tools = json.loads((suite / "tools.json").read_text())
    assert tools == [{"type": "function", "effect": "read" if function["name"] == "searchBooks" else effect,
                      "function": function} for function, effect in FUNCTIONS]
    snapshot = json.loads((repo / "data" / "library" / "snapshot.json").read_text())
    assert snapshot.pop("taken_at")
    assert snapshot == {"schema_version": 1, "source": f"sqlite:///{database}", "tables": {
        "books": {"csv": "books.csv", "rows": 3, "primary_key": ["isbn"]},
        "fines": {"csv": "fines.csv", "rows": 2, "primary_key": ["fine_id"]},
        "loans": {"csv": "loans.csv", "rows": 3, "primary_key": ["id"]},
        "members": {"csv": "members.csv", "rows": 3, "primary_key": ["member_no"]}}}
    assert (repo / "data" / "library" / "loans.csv").read_text() == (
        "id,book_isbn,member_no,due_date,returned\n1,978-0-14-044913-6,M-07,2026-12-01,false\n"
        "2,978-0-19-953556-9,M-07,2026-12-03,true\n3,978-0-452-28423-4,M-12,2026-11-20,false\n")   # BOOLEAN as such
    assert "  members: data/library/members.csv, 3 records, id member_no (the primary key)" in out
    assert "  loans: child of books through book_isbn (its name and values)" in out
    assert "  holds.csv: no records, left out" in out
    assert "  loans.member_no holds members ids too (one parent per entity: loans is a child of books)" in out

    assert run(capsys, "generate", "--suite", str(suite), "--out", str(tmp_path / "empty.jsonl"))[:2] == \
        (0, f"wrote 0 cases (0 scenarios) to {tmp_path / 'empty.jsonl'}\n")
    (suite / "templates.json").write_text(json.dumps(LIBRARY_TEMPLATES), encoding="utf-8")
    assert run(capsys, "generate", "--suite", str(suite), "--out", str(tmp_path / "cases.jsonl"),
               "--cases-per-scenario", "3")[0] == 0
    loans = {1: "Crime and Punishment", 2: "Middlemarch", 3: "1984"}   # each loan is of one book, its parent
    cases = [case.model_dump(by_alias=True) for case in read_cases(tmp_path / "cases.jsonl")]
    assert sorted(case["business_data"]["loans"]["id"] for case in cases) == [1, 2, 3]
    for case in cases:
        loan = case["business_data"]["loans"]["id"]
        assert case["user_instructions"] == f"Renew your loan of '{loans[loan]}' (loan {loan}) until 2027-01-10."
        assert case["expected_function_calls"][0]["arguments"] == {"loan_id": loan, "due_date": "2027-01-10"}


def sample_templates_for(entities: dict[str, str]) -> str:
    """The sample's templates.json with its entity names replaced by the inferred ones."""
    text = (REPO / "scenarios" / "support_tickets" / "templates.json").read_text(encoding="utf-8")
    for old, new in entities.items():
        text = text.replace(f"{{{old}.", f"{{{new}.")
    return text


@pytest.mark.slow
def test_an_mcp_server_and_csv_files_give_a_suite_generate_accepts(tmp_path, capsys):
    suite = tmp_path / "tickets"   # not under scenarios/: the data goes into the suite folder
    status, out, err = run(capsys, "init", str(suite), "--tools", SAMPLE_SERVER,
                           "--data", str(REPO / "data" / "support_tickets"))
    assert (status, err) == (0, "")
    assert json.loads((suite / "tools.json").read_text()) == \
        json.loads((REPO / "scenarios" / "support_tickets" / "tools.json").read_text())
    entities = json.loads((suite / "suite.json").read_text())["entities"]
    assert entities["tickets"] == {"csv": "data/tickets/tickets.csv", "id": "id",
                                   "parent": {"entity": "departments", "key": "department_code"}}
    assert entities["action_items"] == {"csv": "data/tickets/action_items.csv", "id": "id",
                                        "parent": {"entity": "tickets", "key": "parent_ticket_id"}}
    assert entities["employees"]["id"] == "email"
    assert "  employees: data/tickets/employees.csv, 30 records, id email (a guess: the first column whose " \
           "values are all present and different)" in out
    assert (suite / "data" / "tickets" / "tickets.csv").read_bytes() == \
        (REPO / "data" / "support_tickets" / "tickets.csv").read_bytes()
    (suite / "templates.json").write_text(sample_templates_for(
        {"ticket": "tickets", "action": "action_items", "employee": "employees"}), encoding="utf-8")
    status, out, _ = run(capsys, "generate", "--suite", str(suite), "--out", str(tmp_path / "cases.jsonl"))
    assert status == 0 and out.startswith("wrote 39 cases (13 scenarios)")


def test_data_already_in_the_suites_data_folder_stays_where_it_is(library, tmp_path, capsys):
    repo = tmp_path / "repo"
    (repo / "data" / "shop").mkdir(parents=True)
    (repo / "data" / "shop" / "orders.csv").write_text("order_id,total\nA1,10\nA2,12\n", encoding="utf-8")
    status, out, err = run(capsys, "init", str(repo / "scenarios" / "shop"), "--tools", str(library[0]),
                           "--data", str(repo / "data" / "shop"))
    assert (status, err) == (0, "")
    assert listing(repo / "data") == ["shop", "shop/orders.csv"]
    assert json.loads((repo / "scenarios" / "shop" / "suite.json").read_text())["entities"] == {
        "orders": {"csv": "data/shop/orders.csv", "id": "order_id"}}


def test_a_tools_list_without_effects_needs_them_given(tmp_path, capsys):
    tools = tmp_path / "bot-tools.json"
    tools.write_text(json.dumps([{"type": "function", "function": {"name": "lookup", "parameters": {}}},
                                 {"type": "function", "function": {"name": "cancel", "parameters": {}}}]))
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "orders.csv").write_text("id,total\n1,10\n")
    status, _, err = run(capsys, "init", str(tmp_path / "shop"), "--tools", str(tools),
                         "--data", str(tmp_path / "data"), "--effect", "cancel=write")
    assert status == 2
    assert err == (f"lobeval init: error: {tools}: no effect for 'lookup': the document does not say (lobeval's "
                   f"\"effect\": \"read\" or \"write\" beside \"function\"); give each one's effect (read or write)\n")
    assert run(capsys, "init", str(tmp_path / "shop"), "--tools", str(tools), "--data", str(tmp_path / "data"),
               "--effect", "cancel=write", "--effect", "lookup=read")[0] == 0
    assert [(tool["function"]["name"], tool["effect"]) for tool in
            json.loads((tmp_path / "shop" / "tools.json").read_text())] == [("lookup", "read"), ("cancel", "write")]


# --- bad input: exit 2, one line naming the source and the field, nothing written ------------------------------

BAD_YAML = "openapi: 3.0.3\npaths:\n  /x:\n    get: {operationId: [unclosed\n"


def bad_database(folder: Path) -> Path:
    path = folder / "bad.db"
    with sqlite3.connect(path) as connection:
        connection.executescript("CREATE TABLE visits (day TEXT, room TEXT);"
                                 "INSERT INTO visits VALUES ('mon', 'A'), ('mon', 'A');")
    connection.close()
    return path


@pytest.mark.parametrize("case, message", [
    ("bad YAML", "{api}: line 5: invalid YAML: expected ',' or ']', but got '<stream end>'"),
    ("swagger", "{api}: document: field 'swagger': Swagger 2.0 is not read: convert the document to OpenAPI 3"),
    ("outside reference", "{api}: operation 'GET /x': field '$ref': 'other.yaml#/X': only references inside the "
                          "document (#/...) are followed"),
    ("missing document", "{api}: file: not found"),
    ("no id column", "sqlite:///{source}/bad.db: table 'visits': no id column: no one-column primary key, no "
                     "column named id or visits_id, and no column whose values are all present and different"),
    ("unreachable database", "--data sqlite:///{source}/nowhere/shop.db: cannot read the database: "
                             "OperationalError: unable to open database file"),
    ("not a database", "--data sqlite:///{api}: cannot read the database: DatabaseError: file is not "
                       "a database"),
    ("no driver", "--data nosuchdb://db.example/shop: SQLAlchemy knows no database 'nosuchdb': its own are mssql, "
                  "mysql, mariadb, oracle, postgresql and sqlite; another comes in a package of its own (a dialect for "
                  "SQLAlchemy)"),
    ("driver not installed", "--data oracle://db.example/shop: no driver for 'oracle' is installed: pip install "
                             "oracledb (the module oracledb, the driver SQLAlchemy uses for it; another driver is "
                             "named in the URL as dialect+driver://)"),
    ("postgresql driver not installed",
     "--data postgresql://db.example/shop: no driver for 'postgresql' is installed: pip install \"psycopg[binary]\" "
     "(the module psycopg, the driver SQLAlchemy uses for it; another driver is named in the URL as "
     "dialect+driver://)"),
    ("no records", "--data sqlite:///{source}/empty.db: no table holds a record: a suite needs business data"),
    ("bad URL", "--data: not a database URL (dialect+driver://user:password@host:port/database)"),
    ("one CSV file", "--data {source}/orders.csv: give the folder that holds the CSV files (one per table)"),
    ("unknown table", "--data sqlite:///{db}: no table 'loan' (it has: books, fines, holds, loans, members)"),
    ("suite there", "{suite}: already exists and is not an empty folder; init writes a new suite only"),
])
def test_bad_input_exits_2_naming_the_source_and_writes_nothing(library, tmp_path, capsys, case, message):
    api, db = library
    source, repo = api.parent, tmp_path / "repo"
    (repo / "scenarios").mkdir(parents=True)
    suite = repo / "scenarios" / "library"
    tools, data, extra = str(api), str(db), []
    if case == "bad YAML":
        api.write_text(BAD_YAML)
    elif case == "swagger":
        api.write_text("swagger: '2.0'\npaths: {}\n")
    elif case == "outside reference":
        api.write_text("openapi: 3.1.0\npaths:\n  /x:\n    get:\n      parameters: [{$ref: 'other.yaml#/X'}]\n")
    elif case == "missing document":
        api.unlink()
    elif case == "no id column":
        data = str(bad_database(source))
    elif case == "unreachable database":
        data = f"sqlite:///{source}/nowhere/shop.db"
    elif case == "not a database":
        data = str(api)
    elif case == "no driver":
        data = "nosuchdb://ana:s3cret@db.example/shop"
    elif case == "driver not installed":
        data = "oracle://ana:s3cret@db.example/shop"
    elif case == "postgresql driver not installed":
        data = "postgresql://ana:s3cret@db.example/shop"
    elif case == "no records":
        data = str(source / "empty.db")
        sqlite3.connect(data).executescript("CREATE TABLE t (id INTEGER PRIMARY KEY);").close()
    elif case == "bad URL":
        data = "postgresql://ana:s3cret@db.example:port/shop"
    elif case == "one CSV file":
        data = str(source / "orders.csv")
        Path(data).write_text("id\n1\n")
    elif case == "unknown table":
        extra = ["--table", "loans", "--table", "loan"]
    elif case == "suite there":
        suite.mkdir()
        (suite / "suite.json").write_text("{}")
    before = listing(repo)
    status, out, err = run(capsys, "init", str(suite), "--tools", tools, "--data", data, *extra)
    assert (status, out) == (2, "")
    assert err == "lobeval init: error: " + message.format(api=api, source=source, db=db, suite=suite) + "\n"
    assert listing(repo) == before


def test_a_failure_after_staging_leaves_nothing_behind(library, tmp_path, monkeypatch, capsys):
    """A problem found only when the staged suite is checked (here: forced) removes the staging folder."""
    import lobeval.drafting.suite_init

    def refuse(suite):
        raise ConfigError("refused")

    monkeypatch.setattr(lobeval.drafting.suite_init, "check_data", refuse)
    (tmp_path / "repo" / "scenarios").mkdir(parents=True)
    status, _, err = run(capsys, "init", str(tmp_path / "repo" / "scenarios" / "library"), "--tools",
                         str(library[0]), "--data", str(library[1]))
    assert (status, err) == (2, "lobeval init: error: refused\n")
    assert listing(tmp_path / "repo") == ["scenarios"]


# --- any value anywhere in a document: functions or bad input, never another exception --------------------------

LEAVES = (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
          | st.text(max_size=12))
JSON = st.recursive(LEAVES, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                                         max_size=3), max_leaves=8)
TELLING = st.sampled_from(["", "3.0.0", "#/", "#/components", "#/components/schemas/Shelf", "other.yaml#/X", [],
                           {}, [{}], {"$ref": 5}, {"$ref": "#/components/schemas/NewLoan"}, {"$ref": "#/nowhere"},
                           {"type": "object"}, {"type": "array"}, {"application/json": {}}, {"name": "isbn"},
                           {"name": "q", "in": "query"}, {"name": "q", "in": "path", "schema": 5}])
DOCUMENT_PLACES = [
    ("openapi",), ("paths",), ("paths", "/loans"), ("paths", "/loans", "get"), ("paths", "/loans", "post"),
    ("paths", "/loans", "get", "parameters"), ("paths", "/loans", "get", "parameters", 0),
    ("paths", "/loans", "get", "parameters", 0, "schema"), ("paths", "/loans", "get", "parameters", 0, "in"),
    ("paths", "/loans", "post", "operationId"), ("paths", "/loans", "post", "summary"),
    ("paths", "/loans", "post", "requestBody"), ("paths", "/loans", "post", "requestBody", "content"),
    ("paths", "/loans", "post", "requestBody", "required"),
    ("paths", "/loans", "post", "requestBody", "content", "application/json"),
    ("paths", "/loans", "post", "requestBody", "content", "application/json", "schema"),
    ("paths", "/books/{isbn}", "parameters"), ("paths", "/loans/{loan_id}", "patch", "parameters", 0),
    ("components",), ("components", "schemas", "NewLoan"), ("components", "schemas", "NewLoan", "properties"),
    ("components", "schemas", "NewLoan", "required"), ("components", "schemas", "Isbn"),
    ("components", "parameters", "LoanId"), ("components", "parameters", "LoanId", "name")]


@settings(max_examples=200, derandomize=True, database=None, deadline=None)
@given(place=st.sampled_from(DOCUMENT_PLACES), value=JSON | TELLING)
def test_any_value_in_an_openapi_document_gives_functions_or_bad_input(place, value):
    document = yaml.safe_load(LIBRARY_API)
    node = document
    for key in place[:-1]:
        node = node[key]
    node[place[-1]] = value
    path = Path("library.yaml")
    try:
        functions = functions_from_document(path, document)
        check_tools([{"type": "function", "effect": effect, "function": function} for function, effect in functions],
                    path)
    except RecordError as exc:
        assert exc.file == "library.yaml" and "\n" not in str(exc)


@pytest.mark.parametrize("loans, problem", [
    ("id,book\n1,B1\n2,B9\n", "line 3 (id 2): field 'book': child without a parent: no books with id 'B9'"),
    ("id,book\n1,B1\n1,B1\n", "line 3: field 'id': duplicate id 1"),
])
def test_the_staged_suite_is_checked_as_sampling_reads_it(tmp_path, loans, problem):
    """check_data is what stands between an inference gone wrong and a suite generate would refuse."""
    (tmp_path / "books.csv").write_text("id,title\nB1,Emma\n")
    (tmp_path / "loans.csv").write_text(loans)
    (tmp_path / "tools.json").write_text("[]")
    (tmp_path / "templates.json").write_text("[]")
    (tmp_path / "suite.json").write_text(json.dumps({"entities": {
        "books": {"csv": str(tmp_path / "books.csv"), "id": "id"},
        "loans": {"csv": str(tmp_path / "loans.csv"), "id": "id", "parent": {"entity": "books", "key": "book"}}}}))
    with pytest.raises(RecordError, match=re.escape(f"{tmp_path / 'loans.csv'}: {problem}")):
        check_data(load_suite(tmp_path))
