"""The command line: parse, call, print; errors become exit codes."""
