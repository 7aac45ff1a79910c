"""`python -m powertrip` runs the command line."""

from powertrip.cli.app import main

main()
