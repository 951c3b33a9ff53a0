"""Generators, servers and helpers the tests share (none of them is a test)."""
