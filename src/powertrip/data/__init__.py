"""Data files shipped with PowerTrip (the demo's example sites)."""
