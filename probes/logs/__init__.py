"""Log reading: line readers, the metric pass, progress bars, metric names, the needle
prefilter, faults and their patterns, and the launch checks."""
