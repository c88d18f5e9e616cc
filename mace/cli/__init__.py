"""Command-line interface: `python tools/converter.py <command>` (argparse; printing lives here only)."""
