"""Profiler service: power and RTT/bandwidth profiles of every site (not built yet)."""
