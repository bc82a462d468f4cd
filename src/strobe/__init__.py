"""Strobe: a debugger for coding agents, served over MCP and built on Frida."""

__version__ = "0.1.0"
