"""What the model calls cost (``tether usage``, the page's usage view)."""
