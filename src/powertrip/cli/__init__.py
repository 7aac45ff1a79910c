"""The `powertrip` command line."""
