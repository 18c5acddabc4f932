"""Expression nodes keep their hash once computed; a pickled node must not carry it into
another process, where string hashes differ (plans go to Spark workers by pickle)."""

from __future__ import annotations

import pickle
import subprocess
import sys

from ddflow.sql.expr import Call, Col, Lit
from ddflow.sql.types import BIGINT, BOOLEAN, SqlType

STRING = SqlType("string")


def _tree() -> Call:
    eq = Call("eq", (Col(0, STRING, True, "s"), Lit("MAIL", STRING)), BOOLEAN)
    lt = Call("lt", (Col(1, BIGINT, True, "n"), Lit(7, BIGINT)), BOOLEAN)
    return Call("and", (eq, lt), BOOLEAN)


def test_hash_is_stable_and_equal_trees_hash_alike() -> None:
    a, b = _tree(), _tree()
    assert a is not b and a == b
    assert hash(a) == hash(a) == hash(b)
    assert {a: 1}[b] == 1
    other = Call(
        "and", (a.args[0], Call("lt", (a.args[1].args[0], Lit(8, BIGINT)), BOOLEAN)), BOOLEAN
    )
    assert other != a and {a: 1}.get(other) is None


def test_pickled_node_is_found_by_an_equal_node_in_another_process() -> None:
    a = _tree()
    hash(a)  # (kept on the node before it is pickled)
    blob = pickle.dumps(a)
    code = (
        "import pickle, sys\n"
        "sys.path[:0] = " + repr(sys.path) + "\n"
        "from tests.sql.test_sql_expr_hash import _tree\n"
        "got = pickle.loads(sys.stdin.buffer.read())\n"
        "fresh = _tree()\n"
        "assert got == fresh\n"
        "assert hash(got) == hash(fresh), 'a hash came along with the pickle'\n"
        "assert {fresh: 1}[got] == 1 and {got: 2}[fresh] == 2\n"
        "print('ok')\n"
    )
    for seed in ("1", "2", "12345"):
        run = subprocess.run(
            [sys.executable, "-c", code],
            input=blob,
            capture_output=True,
            env={"PYTHONHASHSEED": seed, "PATH": "/usr/bin:/bin"},
            cwd=str(__import__("pathlib").Path(__file__).resolve().parents[2]),
            check=False,
        )
        assert run.returncode == 0, run.stderr.decode()
        assert run.stdout.decode().strip() == "ok"
