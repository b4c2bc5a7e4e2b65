"""Where the rollup looks: a remote URL's day and table listing through Spark's own file systems
(paths.py; here a file:// URL, which Spark lists like any other), and the local listing that
gives the same answers."""

from __future__ import annotations

from datetime import date

from mirrorlag.rollup.paths import DayInput, DayStatus, day_input, remote_day_input, remote_table_days, table_days
from tests.rollup.history import H, day_ms, every, series, write

DAY = date(2024, 5, 1)


def test_a_remote_day_is_listed_by_spark(spark, tmp_path):
    ts = every(day_ms(DAY), day_ms(DAY) + H, 60_000)
    segment = write(tmp_path / "history", DAY, series("A->B", "orders", 0, ts, ["IN_SYNC"] * len(ts), [1] * len(ts)))
    (segment.parent / ".part-9.parquet.tmp").write_bytes(b"a writer's temporary file: not counted")
    (tmp_path / "history" / "date=2024-05-02").mkdir()
    url = f"file://{tmp_path / 'history'}"
    assert remote_day_input(spark, f"{url}/date={DAY}") == DayInput(DayStatus.PRESENT, segment.stat().st_size)
    assert remote_day_input(spark, f"{url}/date=2024-05-02") == DayInput(DayStatus.EMPTY)
    assert remote_day_input(spark, f"{url}/date=2024-05-03") == DayInput(DayStatus.MISSING)
    # The local listing agrees (it also reads a footer: a day of empty segments is EMPTY there).
    assert day_input(str(tmp_path / "history"), DAY) == DayInput(DayStatus.PRESENT, segment.stat().st_size)


def test_a_remote_tables_days_are_listed_by_spark(spark, tmp_path):
    table = tmp_path / "partition_daily"
    for d in ("2024-04-30", "2024-05-01"):
        (table / f"date={d}").mkdir(parents=True)
        (table / f"date={d}" / "part-0.parquet").write_bytes(b"x")
    (table / "date=2024-05-02").mkdir()  # a failed first write: no file, no day
    (table / "_SUCCESS").write_bytes(b"")
    days = [date(2024, 4, 30), date(2024, 5, 1)]
    assert remote_table_days(spark, f"file://{table}") == days
    assert table_days(str(table), spark) == days
    assert remote_table_days(spark, f"file://{tmp_path / 'nothing'}") == []
    (tmp_path / "flat").mkdir()
    (tmp_path / "flat" / "f.parquet").write_bytes(b"x")
    assert remote_table_days(spark, f"file://{tmp_path / 'flat'}") == []


def test_manifests_and_the_files_they_name_are_listed_read_and_deleted_by_spark(spark, tmp_path):
    """The commit's small files (manifest.py) through a remote URL: the same answers as locally."""
    from mirrorlag.rollup.manifest import Manifest
    from mirrorlag.rollup.paths import delete_files, list_files, manifests, read_text, table_files

    ts = every(day_ms(DAY), day_ms(DAY) + H, 60_000)
    segment = write(tmp_path / "history", DAY, series("A->B", "orders", 0, ts, ["IN_SYNC"] * len(ts), [1] * len(ts)))
    listed = list_files(str(segment.parent), None)
    assert [(s.name, s.size) for s in listed] == [(segment.name, segment.stat().st_size)]
    remote = list_files(f"file://{segment.parent}", spark)
    assert [(s.name, s.size) for s in remote] == [(s.name, s.size) for s in listed]
    assert abs(remote[0].mtime_ms - listed[0].mtime_ms) < 1000
    assert list_files(f"file://{tmp_path}/nothing", spark) == [] == list_files(str(tmp_path / "nothing"), None)

    out = tmp_path / "out"
    m = Manifest(DAY, "r1", True, tuple(listed), {"flow_daily": ("part-1.parquet",)})
    (out / "_manifests").mkdir(parents=True)
    (out / "_manifests" / f"date={DAY}.json").write_text(m.to_json())
    assert manifests(f"file://{out}", spark) == {DAY: m} == manifests(str(out), None)
    assert manifests(f"file://{tmp_path}/none", spark) == {}
    assert read_text(f"file://{out}/_manifests/date={DAY}.json", spark) == m.to_json()
    assert read_text(f"file://{out}/_manifests/nope.json", spark) is None
    flow = out / "flow_daily" / f"date={DAY}"
    flow.mkdir(parents=True)
    for name in ("part-1.parquet", "part-2.parquet"):
        (flow / name).write_bytes(b"x")
    assert {d: sorted(n) for d, n in table_files(f"file://{out}/flow_daily", spark).items()} == \
        {DAY: ["part-1.parquet", "part-2.parquet"]} == \
        {d: sorted(n) for d, n in table_files(str(out / "flow_daily"), None).items()}
    delete_files([f"file://{flow}/part-2.parquet", f"file://{flow}/gone.parquet"], spark)
    assert sorted(p.name for p in flow.iterdir()) == ["part-1.parquet"]
    # The trends' listing follows the manifests: final committed days only.
    assert table_days(f"file://{out}/flow_daily", spark) == [DAY]
    (out / "_manifests" / f"date={DAY}.json").write_text(Manifest(DAY, "r2", False, tuple(listed)).to_json())
    assert table_days(f"file://{out}/flow_daily", spark) == [] == table_days(str(out / "flow_daily"), spark)
