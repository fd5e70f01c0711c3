"""The csm command line (and, later, the streaming service)."""
