"""The file tier's room: the tier, its block file format and its sharded directory tree."""
