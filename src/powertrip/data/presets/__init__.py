"""Preset experiments of `powertrip simulate --preset NAME`."""
