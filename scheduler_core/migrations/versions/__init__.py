"""Schema revisions, oldest first. Each is a frozen snapshot: never import the live schema from one."""
