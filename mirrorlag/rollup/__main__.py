"""Entry point for spark-submit (YARN, Kubernetes, local) and `python -m mirrorlag.rollup`:

    python -m mirrorlag.rollup.ship mirrorlag.zip
    spark-submit --master spark://HOST:7077 --py-files mirrorlag.zip mirrorlag/rollup/__main__.py \
        --history hdfs:///mirrorlag/history --out hdfs:///mirrorlag/rollup [--date YYYY-MM-DD]

The driver and the executors both run mirrorlag's Python: the day's pass summarises segments and
merges partitions with numpy in the executors' Python workers (mapInArrow). The executors get
mirrorlag from --py-files (the zip ship.py writes: the very package the driver runs); they need
pyarrow, numpy and pandas installed (PySpark checks for pandas before any Arrow UDF runs; the
rollup never calls it). The driver needs mirrorlag installed with the `spark` extra (matplotlib
and rich too); deploy/Dockerfile.rollup has it all.
"""

import os
import sys

if __package__ in (None, ""):  # run as a file by spark-submit, not as a module
    _here = os.path.dirname(os.path.abspath(__file__))
    # The script's own directory is sys.path[0]: its job.py, report.py ... would shadow any
    # top-level module of those names. The checkout root serves when mirrorlag is not installed.
    if sys.path and os.path.abspath(sys.path[0] or os.getcwd()) == _here:
        sys.path.pop(0)
    try:
        import mirrorlag  # noqa: F401
    except ImportError:
        sys.path.insert(0, os.path.dirname(os.path.dirname(_here)))

from mirrorlag.rollup.cli import main  # noqa: E402

raise SystemExit(main())
