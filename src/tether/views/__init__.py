"""Compiled views: the owner's pages written as a context file for another harness."""
