"""Compiled views (CLAUDE.md, AGENTS.md) and the marked blocks tether writes."""
