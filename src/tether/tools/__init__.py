"""Core tools: schemas (``schemas.py``) and their implementations (``box.py``)."""
