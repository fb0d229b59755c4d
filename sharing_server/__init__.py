"""Delta Sharing protocol server: Starlette app, protocol encoding, auth and admin CLI."""

__version__ = "0.1.0"
