"""The composition root: builds everything from config, runs the loop, the local API."""
