"""WAN emulator: per-site aggregators behind emulated WAN links on one machine (docs/emulator.md)."""
