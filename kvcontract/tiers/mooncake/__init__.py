"""The Mooncake Store tier's room: the tier on the shared remote-tier base, and Mooncake's client (extra ``mooncake``)."""
