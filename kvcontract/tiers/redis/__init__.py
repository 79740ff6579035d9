"""The Redis tier's room: the tier on the shared remote-tier base, and its redis-py client (extra ``redis``)."""
