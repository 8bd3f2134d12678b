"""wanreduce"""
