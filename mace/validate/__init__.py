"""Compare our outputs with the original framework's: metrics and reference runners."""
