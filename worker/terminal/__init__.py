"""What the commands show people, and nothing of the worker's own: no store, no engine, no Kafka.

- progress: a long command's progress on stderr (import, replay, backfill, evaluate): a bar on a terminal,
  a line every few seconds otherwise
- table: the operator's tables, fitted to the terminal's width
- chart: a player's ratings as a sparkline, and the series both it and the picture are drawn from
- plot: pictures (matplotlib, the [plot] extra): a player's ratings over time, the calibration of `evaluate`
- demo_screen: what `rating-worker demo` shows, one rich renderable from a snapshot of plain values
"""
