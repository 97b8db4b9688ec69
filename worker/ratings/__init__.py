"""Pure rating math: plain values in, plain values out. No I/O, no clocks, no globals that change."""
