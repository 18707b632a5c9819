"""The absl programs behind the repository's scripts and the installed `albert-*` commands."""
