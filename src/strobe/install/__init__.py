"""`strobe install` (configure the coding agents on this machine to use Strobe's MCP server, and give them a short
text on how to debug with it) and `strobe doctor` (check what Strobe needs). See docs/install.md.

agents.py the agents and their files; config_files.py and toml_table.py the careful edits; instructions.py the text
and where it goes; installer.py plans and applies; doctor.py the checks.
"""
