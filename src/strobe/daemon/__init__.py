"""The long-running daemon: socket server, proxy, and the session manager."""
