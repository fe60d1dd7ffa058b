"""The check ``register`` makes of Spark's Python workers, on the driver, before any query.

Every call of the data source (schema, reader, partitions, reads, writes) runs in a Python worker,
which needs pyarrow and this package. Workers run the interpreter the session was created with
(``PYSPARK_PYTHON``, else ``python3`` on the executors' PATH); when it lacks either, Spark only says
so from deep inside the first query. So: when the workers' interpreter is the driver's own, there
is nothing to check (``local_session`` sets it up that way); otherwise one tiny job of one task asks
a worker what it can import, and a ``WorkerEnvironmentError`` says in one line what to set.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from typing import TYPE_CHECKING, Final

from spark_connector.errors import WorkerEnvironmentError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

WORKER_MODULES: Final = ("pyarrow", "spark_connector")
SPARK_DEFAULT_PYTHON: Final = "python3"
REASON_CHARS_MAX: Final = 300
ERROR_LINE: Final = re.compile(r"^[\w.$]*(Error|Exception): ")


def check_workers(spark: SparkSession) -> None:
    """Raise ``WorkerEnvironmentError`` when the session's Python workers cannot import pyarrow or
    this package, or do not start at all."""
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException

    python = _worker_python(spark)
    if python is None or _is_this_interpreter(python):
        return
    modules = WORKER_MODULES

    def missing_modules(_: object) -> list[str]:
        # Runs in a worker. A nested function is shipped by value, so it needs nothing of ours there.
        import importlib.util

        return [name for name in modules if importlib.util.find_spec(name) is None]

    try:
        missing = spark.sparkContext.parallelize([0], 1).map(missing_modules).collect()[0]
    except (Py4JError, PySparkException) as exc:
        raise WorkerEnvironmentError(_advice(python, f"fail to run a task ({_reason(exc)})")) from exc
    if missing:
        raise WorkerEnvironmentError(_advice(python, f"cannot import {', '.join(missing)}"))


def _worker_python(spark: SparkSession) -> str | None:
    """The interpreter the session's workers run (what pyspark read from ``PYSPARK_PYTHON`` when the
    context started); None for a Spark Connect session, whose workers this driver cannot ask."""
    try:
        context = spark.sparkContext
    except AttributeError:  # Spark Connect: pyspark's PySparkAttributeError
        return None
    return str(getattr(context, "pythonExec", None) or SPARK_DEFAULT_PYTHON)


def _is_this_interpreter(python: str) -> bool:
    """Whether ``python`` names the driver's interpreter by the same path (a virtualenv's python is
    a link whose path decides the environment, so paths are compared, not link targets)."""
    found = shutil.which(python)
    return found is not None and os.path.abspath(found) == os.path.abspath(sys.executable)


def _advice(python: str, problem: str) -> str:
    return (f"Spark's Python workers ({python}) {problem}: create the session with PYSPARK_PYTHON set to a "
            f"Python that has pyarrow and spark_connector, such as this driver's ({sys.executable}); "
            f"spark_connector.session.local_session() does that when PYSPARK_PYTHON is unset")


def _reason(exc: BaseException) -> str:
    """The last "SomeError: ..." line of Spark's error (its text holds Java and Python traces)."""
    lines = [line.strip().removeprefix("Caused by: ") for line in str(exc).splitlines()]
    named = [line for line in lines if ERROR_LINE.match(line)]
    return (named or [type(exc).__name__])[-1][:REASON_CHARS_MAX]
