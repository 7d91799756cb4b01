"""Shared IO layer under every package: Beam FileSystems storage, atomic writes, JSON helpers."""
