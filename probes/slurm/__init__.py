"""The SLURM wing: the probe, scheduler-output parsing, the SSH transport, assembly of facts
from the collector's answer, checkpoint listings, and the recording writer and replay reader."""
