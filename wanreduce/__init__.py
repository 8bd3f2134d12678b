"""wanreduce: in-network gradient aggregation for wide-area training."""

__version__ = "0.1.0"
