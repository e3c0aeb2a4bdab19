"""Test-only stand-in (see tests/stubs/README.md)."""
