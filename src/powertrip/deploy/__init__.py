"""Deployment tooling: images built from Debian packages for hosts with no registry (through
the Docker SDK), and the offline wheelhouse they install from. Needs `powertrip[deploy]`."""
