"""The nightly rollup of the lag history (docs/design.md §7): a PySpark job.

    mirrorlag rollup --history DIR_OR_URL --out DIR_OR_URL [--date YYYY-MM-DD | --from D [--to D]]
                     [--lookback-days 7] [--catch-up-days 14] [--settle-minutes 60] [--force]
                     [--master local[*] | --remote sc://HOST:PORT] [--conf k=v ...] [--max-gap-seconds 60] [--worst 10]
    spark-submit [--master spark://...|yarn|k8s://...] --py-files mirrorlag.zip mirrorlag/rollup/__main__.py --history ... --out ...

On a cluster the executors import mirrorlag from the zip (`python -m mirrorlag.rollup.ship
mirrorlag.zip`, ship.py); through Spark Connect the job sends it itself (remote.py).

Without --date/--from, every day of the lookback (up to yesterday), and every older day of the
history without a rollup receipt within --catch-up-days, that is new or whose history changed
since its rollup, then the trends of the days after it (late data, manifest.py); a committed
day's lost receipt is written again. Exit
status 0, 2 on bad arguments, a failed Spark job or a day asked for that would lose inputs
(--force), 3 when a day asked for has no history (a backfill still writes every day that has
some), or none of the lookback's days has any. Input: `<history>/date=YYYY-MM-DD/*.parquet`, one row per
partition per poll (mirrorlag.history's columns; extra columns are ignored, missing ones read
as null; files starting with `.` or `_` are skipped).

Output, Parquet partitioned by `date` (re-running a day replaces that day, and the trends of the
days after it); `<out>/_manifests/date=YYYY-MM-DD.json` commits a day: it names the day's files
of every table, which readers should follow (paths.committed_files) to see each day whole.
Every table has a column `final`: false while the day is provisional (not over, or its newest
segment younger than --settle-minutes); a provisional day stays out of other days' trends.

`<out>/partition_daily`, `<out>/topic_daily`, `<out>/flow_daily`; key columns `flow` ("A->B"),
`source`, `target`, then `topic` and `partition` as the level has them; topic rows add
`partitions`, flow rows `topics` and `partitions`. Then, per day:
  samples                     rows in the history (all of them: unknown states and null lags too) of
                              the writers that count: where several sidecars wrote one history
                              (rows name their `writer`), per partition-day the one with the most
                              samples, and any other whose samples do not overlap it in time
                              (by more than 10 min: a sidecar that took over from another); within
                              such an overlap the first one's samples alone (one writer per time
                              span; the lag figures still hold both writers' samples of it).
                              Two sidecars with one writer id read as one writer; where one
                              writer's samples of a partition come less than half its poll
                              interval apart 3 times or more in the day, a warning line after the
                              day's names the writer id and the partitions (the day rolled up)
  coverage                    share of the level's partition-time with samples (0..1)
  record_lag_min/_avg/_max    records, over samples with a record lag
  record_lag_p50/_p95/_p99    nearest-rank percentiles from 1 % buckets: a real sample, never below
                              the exact percentile, at most 1 % above, exact below 100 (histograms.py)
  time_lag_{min,avg,max,p50,p95,p99}_s       the same for time lag, in seconds
  freshness_lag_max_s, byte_lag_max
  covered_seconds             partition-seconds with samples
  out_of_sync_seconds         partition-seconds not IN_SYNC: each sample accounts for the time to the
                              partition's next sample, at most 4 poll intervals of the sidecar that
                              wrote it (its rows' refresh_interval_ms; --max-gap-seconds for rows
                              written before rows had it) (the day's last one to midnight, at most
                              that too), so a gap in the history is not counted;
                              a GONE sample (the partition left the flow) accounts for no time.
                              The day's first sample also accounts for the time since midnight
                              before it, at most the same cap, in its own state: the previous day's
                              last sample is not in the day's rows, and the first sample's state is
                              the best evidence of that span (a day-long stall: 86,400 s at any poll
                              interval and phase). A run of STALLED samples starts where its first
                              sample's time lag says the partition fell behind (ts - time_lag_ms),
                              at most back to the previous sample (or midnight) and at most the cap:
                              the samples between a stall's start and the poll that first reads
                              STALLED were taken before it was judged, and the time lag (behind
                              since) is the only age the history rows carry (no LRO age): an upper
                              bound on the stall, so where the partition was already LAGGING when
                              it stalled, the interval of the sample before the run can count as
                              STALLED (out of sync either way). Without a time lag the run starts
                              at its sample.
                              A stall's end is known to a poll: the first sample that reads another
                              state
  at_risk_seconds, stalled_seconds           partition-seconds AT_RISK, STALLED
  stall_episodes              runs of consecutive STALLED samples (summed over partitions)
  longest_stall_seconds       the longest run, its samples' intervals (and its look-back) added up
  unknown_state_samples       samples whose state is null or not a State (counted as out of sync)
  null_record_lag_samples, null_time_lag_samples
  first_ts, last_ts           first and last sample (UTC)
  out_of_sync_seconds_by_hour 24 partition-second sums, by the hour (UTC) of the sample whose
                              interval it is (a look-back or the midnight gap with its sample)
  covered_seconds_by_hour     the same for covered_seconds (the heat map's denominators)

Shares of time out of sync (report, summary) are of the *covered* partition-time: a sidecar that
started at noon was out of sync for a share of the time it watched, not of the whole day.

`<out>/trends`: per day, one row per partition, topic and flow present that day (`level`):
record_lag_p95 and out_of_sync_seconds with their day-over-day (`_dod`) and week-over-week
(`_wow`) changes, `slope_7d`/`slope_28d` (least squares of daily p95 record lag, records/day),
their t-statistics (`_t`) and day counts (`days_7d`, `days_28d`), `growing` (trend_rule.py: the
last 7 days against the same weekdays of up to 7 weeks before, past the change's own noise; 4 weeks
of history at least) and its evidence: `change_7d` (records), `change_7d_ratio`, `noise_7d`
(records: the change's standard deviation), `score_7d` and `needed_7d` (change over noise, and what
growth needs there), `daily_noise_7d` (the series' day-to-day noise, relative), `weeks_7d` (weeks of
history before the last 7 days), `compared_7d` and `up_7d` (days compared, days above their
baseline), `rising_7d` (each of the last 4 weeks at least 10 % above the one before);
`out_of_sync_growing` the same rule on daily out-of-sync seconds (its own minimum
change, in seconds) with the same evidence prefixed `out_of_sync_`. What a flag is worth, measured:
docs/history-and-rollup.md ("How often growing is wrong").

`<out>/reports/mirrorlag-YYYY-MM-DD.html`: the day's report, one self-contained file (a provisional
day's says so). A file of the day's commit: written to `<out>/_reports/date=YYYY-MM-DD/` under the
run's name, named by the manifest, and copied to `reports/` after the commit (the copy removed
before it), so the copy is always the committed version or missing (the next run writes it). A day
whose trends are recomputed gets its report's trend figures replaced in the same commit.
"""
