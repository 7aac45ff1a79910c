"""The error hierarchy of PowerTrip.

Every error raised on bad input is a `PowerTripError`, so a command-line or service front end
can turn all of them into one clear message (or one status code) in a single place.
"""


class PowerTripError(Exception):
    """Base class of every error PowerTrip raises on bad input or configuration."""


class InvalidSiteError(PowerTripError, ValueError):
    """A site record or site table holds a value outside its domain."""


class InvalidValueError(PowerTripError, ValueError):
    """A scalar setting (update size, distance, ...) is outside its domain or unparsable."""


class PolicyConfigError(PowerTripError, ValueError):
    """A policy name or one of its settings is unknown or invalid."""


class SelectionError(PowerTripError, RuntimeError):
    """A policy cannot choose any site under its settings (for example an empty radius)."""


class SitesFileError(PowerTripError, ValueError):
    """A sites file cannot be read or holds an invalid entry; the message names file and entry."""
