"""mirrorlag as one zip for Spark's executors: `python -m mirrorlag.rollup.ship mirrorlag.zip`.

The rollup's map and merge tasks run mirrorlag's numpy code in the executors' Python workers, so
they must import the same mirrorlag the driver runs. The zip holds exactly the imported package
(its .py files and the .json data it reads; mirrorlag is pure Python), for
  - spark-submit on a cluster: `--py-files mirrorlag.zip` (Spark puts it on the workers' sys.path);
  - Spark Connect: the rollup adds it to its session itself (remote.ship_to).
The executors still need the rollup's dependencies installed: numpy, pyarrow and pandas (PySpark
checks for it before any Arrow UDF runs), i.e. the `spark` extra's packages.
"""

from __future__ import annotations

import argparse
import sys
import zipfile
from pathlib import Path
from typing import Sequence

_FIXED_TIME = (2020, 1, 1, 0, 0, 0)  # the same package gives the same bytes
PACKAGED = {".py", ".json"}  # the code, and the data it reads (rollup/trend_figures.json)


def package_root() -> Path:
    import mirrorlag

    return Path(mirrorlag.__file__).resolve().parent


def package_zip(dest: Path) -> Path:
    """Write the imported mirrorlag package (its PACKAGED files) to `dest`, `mirrorlag/...` inside."""
    root = package_root()
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(root.rglob("*")):
            if "__pycache__" in path.parts or path.suffix not in PACKAGED:
                continue
            info = zipfile.ZipInfo(f"mirrorlag/{path.relative_to(root).as_posix()}", _FIXED_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, path.read_bytes())
    tmp.replace(dest)
    return dest


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mirrorlag.rollup.ship",
                                     description="write mirrorlag as a zip for spark-submit --py-files")
    parser.add_argument("dest", type=Path, help="the zip to write, e.g. dist/mirrorlag.zip")
    args = parser.parse_args(argv)
    path = package_zip(args.dest)
    print(f"{path} ({path.stat().st_size:,} bytes, from {package_root()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
